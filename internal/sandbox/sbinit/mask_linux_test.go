package sbinit

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestMaskReplacedFile masks a file that is replaced by rename over and
// over meanwhile, as useradd and groupadd replace the host's
// /etc/gshadow, which a root-mode sandbox on the host's dirs masks: every
// mask holds. A rename between the mount's lookup of its target and its
// lock of it made the mount fail with ENOENT (a create under load once
// failed so), though the path never stopped existing.
func TestMaskReplacedFile(t *testing.T) {
	privtest.RequireRoot(t)
	root := t.TempDir()
	etc := filepath.Join(root, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(etc, "gshadow")
	if err := os.WriteFile(target, []byte("root:*::\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	renamed := make(chan int)
	go func() { // the host's useradd, as fast as it goes
		n := 0
		for ; !stop.Load(); n++ {
			tmp := target + "+"
			if err := os.WriteFile(tmp, []byte("root:*::\n"), 0o640); err == nil {
				os.Rename(tmp, target)
			}
		}
		renamed <- n
	}()

	const masks = 3000
	type result struct {
		failed int
		first  error
		setup  error
	}
	done := make(chan result)
	go func() {
		// Mounts in a mount namespace of this thread's own, which dies
		// with the goroutine (no UnlockOSThread): the test's host sees none.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- result{setup: err}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- result{setup: err}
			return
		}
		var r result
		for range masks {
			if err := mask(root, "/etc/gshadow"); err != nil {
				if r.failed++; r.first == nil {
					r.first = err
				}
				continue
			}
			// A rename detaches the mask by itself; else unmount it.
			unix.Unmount(target, unix.MNT_DETACH)
		}
		done <- r
	}()
	r := <-done
	stop.Store(true)
	n := <-renamed
	if r.setup != nil {
		t.Fatalf("a mount namespace of the test's own: %v", r.setup)
	}
	if r.failed > 0 {
		t.Errorf("%d of %d masks failed while the file was replaced %d times; the first: %v", r.failed, masks, n, r.first)
	}
}
