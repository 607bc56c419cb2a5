package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/minisandbox/msb/internal/privtest"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// requireRoot skips a test that needs root, or fails it when the suite
// runs as root (privtest.RequireRoot).
func requireRoot(t testing.TB) {
	t.Helper()
	privtest.RequireRoot(t)
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// node describes one path of a test tree.
type node struct {
	content string // file content (default) ...
	mode    os.FileMode
	dir     bool
	symlink string
	fifo    bool
}

// writeTree creates the nodes under dir; parent directories are made 0755.
func writeTree(t testing.TB, dir string, nodes map[string]node) {
	t.Helper()
	paths := make([]string, 0, len(nodes))
	for p := range nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := nodes[p]
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := n.mode
		var err error
		switch {
		case n.dir:
			if mode == 0 {
				mode = 0o755
			}
			err = os.MkdirAll(full, 0o755)
		case n.symlink != "":
			err = os.Symlink(n.symlink, full)
		case n.fifo:
			err = unix.Mkfifo(full, 0o644)
		default:
			if mode == 0 {
				mode = 0o644
			}
			err = os.WriteFile(full, []byte(n.content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n.symlink == "" && mode != 0 {
			if err := unix.Chmod(full, uint32(mode.Perm())|unixModeBits(mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func unixModeBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

// view describes every path under root: type, mode, owner, size and content
// hash or target. Times and link counts are left out.
func view(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode&0o7777, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			desc = "dir " + desc
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc = fmt.Sprintf("file %s size=%d sha=%s", desc, len(b), hex.EncodeToString(sum[:8]))
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc = fmt.Sprintf("symlink uid=%d gid=%d -> %s", st.Uid, st.Gid, target)
		case unix.S_IFCHR:
			desc = fmt.Sprintf("char %s %d:%d", desc, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			desc = "fifo " + desc
		default:
			desc = fmt.Sprintf("other %o %s", st.Mode&unix.S_IFMT, desc)
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffViews(t testing.TB, want, got map[string]string) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %q: %s", p, w))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%q: got %s, want %s", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %q: %s", p, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("views differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// mountOverlay mounts an overlay at target and unmounts it at cleanup. With
// upper == "" the mount is read-only (lowers only).
func mountOverlay(t testing.TB, target string, lowers []string, upper, work string, extra string) {
	t.Helper()
	opts := "lowerdir=" + strings.Join(lowers, ":")
	if upper != "" {
		opts += ",upperdir=" + upper + ",workdir=" + work
	}
	if extra != "" {
		opts += "," + extra
	}
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay at %s (%s): %v", target, opts, err)
	}
	t.Cleanup(func() { unmount(t, target) })
}

func unmount(t testing.TB, target string) {
	t.Helper()
	if err := unix.Unmount(target, 0); err != nil && err != unix.EINVAL {
		t.Errorf("unmount %s: %v", target, err)
	}
}

func mkdirs(t testing.TB, base string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		p := filepath.Join(base, n)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// listDir returns the names in a store subdirectory (recursively for fan-outs).
func countFiles(t testing.TB, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}
