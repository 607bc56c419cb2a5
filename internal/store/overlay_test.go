package store

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func lowerTree() map[string]node {
	return map[string]node{
		"keep.txt":           {content: "keep"},
		"gone.txt":           {content: "to delete"},
		"edit.txt":           {content: "before"},
		"chmod.sh":           {content: "#!/bin/sh\n", mode: 0o644},
		"pkg/__init__.py":    {content: ""},
		"pkg/mod.py":         {content: "x = 1\n"},
		"pkg/sub/deep.py":    {content: "deep\n"},
		"rmdir/a":            {content: "a"},
		"rmdir/b/c":          {content: "c"},
		"recreate/old1":      {content: "old 1"},
		"recreate/old2/x":    {content: "old x"},
		"recreate/keepname":  {content: "old keepname"},
		"link":               {symlink: "keep.txt"},
		"site/dist/METADATA": {content: "Name: dist\n"},
	}
}

// mutate changes a merged overlay view the way an install step might.
func mutate(t *testing.T, merged string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(merged, "gone.txt")))
	must(os.WriteFile(filepath.Join(merged, "edit.txt"), []byte("after"), 0o644))
	must(os.Chmod(filepath.Join(merged, "chmod.sh"), 0o755))
	must(os.RemoveAll(filepath.Join(merged, "rmdir")))
	must(os.RemoveAll(filepath.Join(merged, "recreate")))
	must(os.MkdirAll(filepath.Join(merged, "recreate/new"), 0o755))
	must(os.WriteFile(filepath.Join(merged, "recreate/keepname"), []byte("new keepname"), 0o600))
	must(os.WriteFile(filepath.Join(merged, "recreate/new/y"), []byte("new y"), 0o644))
	must(os.Remove(filepath.Join(merged, "pkg/sub/deep.py")))
	must(os.WriteFile(filepath.Join(merged, "pkg/added.py"), []byte("added\n"), 0o644))
	must(os.Remove(filepath.Join(merged, "link")))
	must(os.Symlink("edit.txt", filepath.Join(merged, "link")))
	must(os.RemoveAll(filepath.Join(merged, "site/dist")))
	must(os.WriteFile(filepath.Join(merged, "site/dist"), []byte("now a file"), 0o644))
}

// TestCommitOverlayUpper commits an overlay upper dir and checks that the
// committed layer stacked on its parent gives the merged view it came from.
func TestCommitOverlayUpper(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	base := t.TempDir()
	lowerSrc, upper, work, merged, check := func() (a, b, c, d, e string) {
		p := mkdirs(t, base, "lower", "upper", "work", "merged", "check")
		return p[0], p[1], p[2], p[3], p[4]
	}()
	writeTree(t, lowerSrc, lowerTree())
	lowerID, err := s.CommitDir(t.Context(), lowerSrc, CommitOptions{Ref: "base/test"})
	if err != nil {
		t.Fatal(err)
	}

	mountOverlay(t, merged, []string{s.TreePath(lowerID)}, upper, work, "redirect_dir=off,metacopy=off")
	mutate(t, merged)
	want := view(t, merged)
	unmount(t, merged)

	// The upper dir has what we must handle: whiteouts and an opaque dir.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(upper, "gone.txt"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("upper gone.txt is not a whiteout: %v %o", err, st.Mode)
	}
	if v, ok, _ := getXattr(filepath.Join(upper, "recreate"), "trusted.overlay.opaque"); !ok || v != "y" {
		t.Fatalf("upper recreate/ is not opaque")
	}

	envID, err := s.CommitDir(t.Context(), upper, CommitOptions{Parents: []LayerID{lowerID}, Ref: "env/test"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Manifest(envID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, e := range m.Entries {
		k := string(e.Type)
		if e.Opaque {
			k += "+opaque"
		}
		kinds[e.Path] = k
	}
	for p, k := range map[string]string{"gone.txt": "delete", "rmdir": "delete", "recreate": "dir+opaque", "pkg/sub/deep.py": "delete", "site/dist": "file"} {
		if kinds[p] != k {
			t.Errorf("manifest %s is %q, want %q", p, kinds[p], k)
		}
	}

	stack, err := s.Stack(envID)
	if err != nil || len(stack) != 2 || stack[0] != envID || stack[1] != lowerID {
		t.Fatalf("stack %v, %v", stack, err)
	}
	var lowers []string
	for _, id := range stack {
		lowers = append(lowers, s.TreePath(id))
	}
	mountOverlay(t, check, lowers, "", "", "")
	diffViews(t, want, view(t, check))
	unmount(t, check)

	// The committed layer also works under a fresh upper, as a sandbox uses it.
	up2, wk2 := mkdirs(t, base, "up2", "wk2")[0], mkdirs(t, base, "wk2")[0]
	mountOverlay(t, check, lowers, up2, wk2, "")
	diffViews(t, want, view(t, check))
	if err := os.WriteFile(filepath.Join(check, "keep.txt"), []byte("task write"), 0o644); err != nil {
		t.Fatal(err)
	}
	unmount(t, check)
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("task write reached the store: %v %v", err, r.Problems)
	}
}

// TestCommitXattrWhiteouts commits an upper dir that uses the xattr forms
// (overlay.whiteout on an empty file, overlay.opaque "x" on its directory,
// overlay.opaque "y" for opaque), and checks against the kernel's reading of
// the same dir used as a lower layer.
func TestCommitXattrWhiteouts(t *testing.T) {
	requireRoot(t)
	for _, ns := range []string{"trusted", "user"} {
		t.Run(ns, func(t *testing.T) {
			s := newStore(t)
			base := t.TempDir()
			p := mkdirs(t, base, "lower", "upper", "m1", "m2")
			lowerSrc, upper, m1, m2 := p[0], p[1], p[2], p[3]
			writeTree(t, lowerSrc, lowerTree())
			lowerID, err := s.CommitDir(t.Context(), lowerSrc, CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			writeTree(t, upper, map[string]node{
				"gone.txt":        {content: ""},
				"pkg/sub/deep.py": {content: ""},
				"recreate/fresh":  {content: "fresh"},
				"added":           {content: "added"},
			})
			set := func(path, name, val string) {
				if err := unix.Lsetxattr(filepath.Join(upper, path), ns+".overlay."+name, []byte(val), 0); err != nil {
					t.Fatal(err)
				}
			}
			set("gone.txt", "whiteout", "")
			set(".", "opaque", "x")
			set("pkg/sub/deep.py", "whiteout", "")
			set("pkg/sub", "opaque", "x")
			set("recreate", "opaque", "y")

			// What the kernel makes of it (xattr whiteouts count in lower layers).
			extra := ""
			if ns == "user" {
				extra = "userxattr"
			}
			mountOverlay(t, m1, []string{upper, s.TreePath(lowerID)}, "", "", extra)
			want := view(t, m1)
			unmount(t, m1)
			if _, ok := want["gone.txt"]; ok {
				t.Fatal("this kernel does not honour xattr whiteouts in lower layers")
			}

			id, err := s.CommitDir(t.Context(), upper, CommitOptions{Parents: []LayerID{lowerID}})
			if err != nil {
				t.Fatal(err)
			}
			mountOverlay(t, m2, []string{s.TreePath(id), s.TreePath(lowerID)}, "", "", "")
			diffViews(t, want, view(t, m2))
		})
	}
}
