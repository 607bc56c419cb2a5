package bench

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPipeShell(t *testing.T) {
	sh, err := startPipeShell(exec.Command("bash", "--noprofile", "--norc"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  string
		fail string // "" when the command must succeed
	}{
		{"true", ""},
		{"x=41; x=$((x+1))", ""},
		{"test $x = 42", ""},                         // state persists between commands
		{"echo __msb_bench_00=0; false", "exited 1"}, // a status-like line in the output does not end the reply
		{"echo oops >&2; exit_code=3; (exit $exit_code)", "exited 3: oops"},
		{"read -r line; test -z \"$line\"", ""}, // the command's stdin is /dev/null, not the shell's
	} {
		err := sh.run(ctx, tc.cmd)
		switch {
		case tc.fail == "" && err != nil:
			t.Errorf("%q: %v", tc.cmd, err)
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%q: error %v, want one containing %q", tc.cmd, err, tc.fail)
		}
	}
	if err := sh.close(); err != nil {
		t.Fatal(err)
	}
	if err := sh.run(ctx, "true"); err == nil {
		t.Fatal("a closed shell answered")
	}
}

func TestPipeShellExited(t *testing.T) {
	sh, err := startPipeShell(exec.Command("bash", "--noprofile", "--norc"))
	if err != nil {
		t.Fatal(err)
	}
	defer sh.close()
	err = sh.run(context.Background(), "exit 7")
	if err == nil || !strings.Contains(err.Error(), "shell exited") {
		t.Fatalf("a shell that exited: %v", err)
	}
}

func TestPodmanConfig(t *testing.T) {
	c := podmanConfig("runc")
	for _, want := range []string{`runtime = "runc"`, `cgroup_manager = "cgroupfs"`, `events_logger = "file"`, "default_ulimits = [\"nofile="} {
		if !strings.Contains(c, want) {
			t.Errorf("containers.conf lacks %s:\n%s", want, c)
		}
	}
	// the limits podman sets must be ones this process could set
	if n := strconv.FormatUint(hardLimit(unix.RLIMIT_NOFILE, 1<<20), 10); !strings.Contains(c, "nofile="+n+":"+n) {
		t.Errorf("nofile is not the hard limit %s:\n%s", n, c)
	}
	s := storageConfig("/x/podman")
	if !strings.Contains(s, `driver = "overlay"`) || !strings.Contains(s, `graphroot = "/x/podman/root"`) || !strings.Contains(s, `runroot = "/x/podman/run"`) {
		t.Errorf("storage.conf:\n%s", s)
	}
}
