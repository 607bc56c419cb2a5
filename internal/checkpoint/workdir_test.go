package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestRemoveWork: a restore's work dir holding a bind of a host dir is
// removed only once the bind is unmounted; while it stays mounted (its
// unmount failed), neither the dir nor the host dir's files are touched.
func TestRemoveWork(t *testing.T) {
	privtest.RequireRoot(t)
	host, work := t.TempDir(), t.TempDir()
	kept := filepath.Join(host, "kept")
	if err := os.WriteFile(kept, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(work, "bind")
	if err := os.Mkdir(at, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(host, at, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(at, unix.MNT_DETACH) })
	busy := func(string) error { return unix.EBUSY }
	if err := removeWork(work, []string{at}, busy); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("removeWork with a bind that stays mounted: %v, want EBUSY", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the host dir's file after removeWork: %v", err)
	}
	if err := removeWork(work, []string{at}, unmountDetached); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("work dir after removeWork: %v", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the host dir's file after removeWork: %v", err)
	}
}
