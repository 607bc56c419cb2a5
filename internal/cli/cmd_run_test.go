package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunHandsNothingOfTheCallers: msb run gives the sandbox neither a
// descriptor its caller left open (here on a host dir) nor its own stdout
// when that is a host file.
func TestRunHandsNothingOfTheCallers(t *testing.T) {
	state := t.TempDir()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("HOST-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC, as `exec 7<dir` leaves it
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	out, err := os.CreateTemp(t.TempDir(), "stdout-")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	out.WriteString("OLD-OUTPUT\n")
	n := strconv.Itoa(fd)
	script := "cat /proc/self/fd/" + n + "/secret && exit 7; echo x > /proc/self/fd/" + n + "/pwned && exit 8; " +
		"test -f /proc/self/fd/1 && exit 9; echo ok"
	stdout := os.Stdout
	os.Stdout = out
	code := Main([]string{"--state-dir", state, "run", "--", "sh", "-c", script})
	os.Stdout = stdout
	b, _ := os.ReadFile(out.Name())
	if code != 0 || string(b) != "OLD-OUTPUT\nok\n" {
		t.Fatalf("msb run exited %d (7: read through the fd, 8: wrote through it, 9: stdout is the host file); stdout file %q", code, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("the sandbox wrote into the host dir")
	}
}

func TestRunDiskFlag(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "--disk", "lots", "--", "true"}, exitUsage},
		{[]string{"run", "--disk", "1K", "--", "true"}, exitInvalidConfig},
		{[]string{"run", "--disk", "16M", "--", "sh", "-c", "dd if=/dev/zero of=/f bs=1M count=32 2>/dev/null && exit 3; exit 0"}, 0},
	} {
		if got := Main(append([]string{"--state-dir", state}, tc.args...)); got != tc.want {
			t.Errorf("msb %v exited %d, want %d", tc.args, got, tc.want)
		}
	}
}
