package sbinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// inMountNS runs f in a mount namespace of a thread of its own, which
// dies with it (no UnlockOSThread): the test's host sees none of its
// mounts. Its error, or the namespace's, fails t.
func inMountNS(t *testing.T, f func() error) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// hostEtc makes a host dir holding a public file, a secret (gshadow, as
// the host's, mode 0640) and a secret dir (ssh), and returns its path.
func hostEtc(t *testing.T, dir string) string {
	t.Helper()
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{etc, filepath.Join(etc, "ssh")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]os.FileMode{"public": 0o644, "gshadow": 0o640, "ssh/key": 0o600} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(name+"-content\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return etc
}

// replace replaces file p by rename with the same bytes and mode, as
// useradd and passwd replace the host's /etc/gshadow and /etc/shadow.
func replace(p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p+"+", data, 0o640); err != nil {
		return err
	}
	return os.Rename(p+"+", p)
}

// TestHostDirHidesAfterRename: a host dir holding masks, given to a
// sandbox that reads it as root (no idmap), hides the masked paths still
// after the host replaced one by rename (a mask mounted over the file was
// detached by that), shows its other files, and what is mounted below it.
func TestHostDirHidesAfterRename(t *testing.T) {
	privtest.RequireRoot(t)
	dir := t.TempDir()
	etc := hostEtc(t, dir)
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	masks := []string{filepath.Join(etc, "gshadow"), filepath.Join(etc, "ssh"), filepath.Join(etc, "absent")}
	inMountNS(t, func() error {
		// A mount below the host dir (a container's /etc/resolv.conf).
		sub := filepath.Join(etc, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "mounted"), []byte("mounted-content\n"), 0o644); err != nil {
			return err
		}
		if err := hostDir(root, etc, -1, masks); err != nil {
			return err
		}
		in := filepath.Join(root, etc)
		var st unix.Statfs_t
		if err := unix.Statfs(in, &st); err != nil {
			return err
		}
		if st.Type != unix.OVERLAYFS_SUPER_MAGIC {
			t.Errorf("the host dir in the sandbox is a filesystem of type %#x, want an overlay", st.Type)
		}
		for name, want := range map[string]string{"public": "public-content\n", "sub/mounted": "mounted-content\n"} {
			if got, err := os.ReadFile(filepath.Join(in, name)); err != nil || string(got) != want {
				t.Errorf("%s in the sandbox: %q, %v; want %q", name, got, err, want)
			}
		}
		hidden := func(when string) {
			for _, name := range []string{"gshadow", "ssh", "ssh/key"} {
				if _, err := os.Lstat(filepath.Join(in, name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s, %s in the sandbox: %v, want it absent", when, name, err)
				}
			}
		}
		hidden("at first")
		if err := replace(filepath.Join(etc, "gshadow")); err != nil {
			return err
		}
		hidden("after the host replaced gshadow by rename")
		if err := os.WriteFile(filepath.Join(in, "new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
			t.Errorf("writing in the host dir in the sandbox: %v, want EROFS", err)
		}
		return nil
	})
}

// TestHostDirFallback: where overlayfs refuses the host dir as a layer
// (here an overlay of an overlay, at the kernel's stacking depth), the
// host dir is bound and masked by mounts over the files, as before: the
// sandbox is made, and the secret is empty in it.
func TestHostDirFallback(t *testing.T) {
	privtest.RequireRoot(t)
	dir := t.TempDir()
	etc := hostEtc(t, dir)
	var made []string
	for _, d := range []string{"empty", "a", "b", "root", "other"} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	empty, a, b, root, other := made[0], made[1], made[2], made[3], made[4]
	inMountNS(t, func() error {
		if err := unix.Mount("overlay", a, "overlay", 0, "lowerdir="+etc+":"+empty); err != nil {
			return err
		}
		if err := unix.Mount("overlay", b, "overlay", 0, "lowerdir="+a+":"+empty); err != nil {
			return err
		}
		secret := filepath.Join(b, "gshadow")
		err := overlayHidden(other, b, []string{"gshadow"})
		if err == nil {
			return fmt.Errorf("overlayfs took an overlay of an overlay (%s) as a layer: the fallback goes untested", b)
		}
		t.Logf("refused as expected: %v", err)
		if _, err := os.Lstat(filepath.Join(other, b, "public")); err == nil {
			t.Errorf("the refused overlay left %s mounted", filepath.Join(other, b))
		}
		if err := hostDir(root, b, -1, []string{secret}); err != nil {
			return err
		}
		if err := mask(root, secret); err != nil {
			return err
		}
		in := filepath.Join(root, b)
		if got, err := os.ReadFile(filepath.Join(in, "public")); err != nil || string(got) != "public-content\n" {
			t.Errorf("public in the sandbox: %q, %v", got, err)
		}
		if got, err := os.ReadFile(filepath.Join(in, "gshadow")); err != nil || len(got) != 0 {
			t.Errorf("gshadow in the sandbox: %q, %v; want it empty (masked)", got, err)
		}
		return nil
	})
}
