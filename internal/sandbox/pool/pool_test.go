package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPool(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("MSB_TEST_STRICT") == "1" {
			t.Fatal("pools need root, and MSB_TEST_STRICT is set")
		}
		t.Skip("pools need root")
	}
	dir := t.TempDir()
	p, err := New(Options{Dir: dir, Size: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the backing file is still linked in %s", dir)
	}
	v, err := p.Create("a", 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create("a", 0); err == nil {
		t.Error("a second volume of the same name was made")
	}
	f := filepath.Join(v.Path(), "f")
	err = os.WriteFile(f, make([]byte, 32<<20), 0o644)
	if !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing 32 MiB into a 16 MiB volume: %v, want EDQUOT", err)
	}
	// Freed space can be written again.
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	if err := os.WriteFile(f, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatalf("writing 8 MiB after freeing the volume: %v", err)
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still there after Remove: %v", err)
	}
	dev := p.Device()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The loop device detaches itself once nothing holds it.
	backing := "/sys/block/" + filepath.Base(dev) + "/loop/backing_file"
	for i := 0; ; i++ {
		b, err := os.ReadFile(backing)
		if err != nil || !strings.Contains(string(b), BackingPrefix+strconv.Itoa(os.Getpid())+"-") {
			break
		}
		if i == 200 {
			t.Fatalf("%s still attached to %s after Close", dev, strings.TrimSpace(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBadVolumeName(t *testing.T) {
	p := &Pool{rootFd: -1}
	for _, name := range []string{"", ".", "..", "a/b", strings.Repeat("x", 5000)} {
		if _, err := p.Create(name, 0); err == nil || !strings.Contains(err.Error(), "invalid volume name") {
			t.Errorf("Create(%q): %v, want an invalid-name error", name, err)
		}
	}
}
