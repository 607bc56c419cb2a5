package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEmptyDirRefusesLink: a reset empties the sandbox's scratch dirs as
// root on the host, so a scratch dir the sandbox's user replaced by a
// symlink to another dir is refused, and what the link names is left.
func TestEmptyDirRefusesLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "host-data")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(victim, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "scratch")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	err := emptyDir(link)
	if err == nil || !strings.Contains(err.Error(), "symlink, not a directory") {
		t.Fatalf("emptyDir of a symlink: %v, want a refusal", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the link's target lost its file: %v", err)
	}

	plain := filepath.Join(dir, "plain")
	if err := os.MkdirAll(filepath.Join(plain, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(plain, "inner-link")); err != nil {
		t.Fatal(err)
	}
	if err := emptyDir(plain); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(plain); len(ents) != 0 {
		t.Fatalf("emptyDir left %v", ents)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a link inside the dir was followed: %v", err)
	}
	if err := emptyDir(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("emptyDir of a missing dir: %v", err)
	}
}

// TestOverlayFlags: a reset's new root is volatile when the old one was,
// whichever way the kernel shows it, and keeps userxattr.
func TestOverlayFlags(t *testing.T) {
	for _, c := range []struct {
		super string
		want  []string
	}{
		{"rw,lowerdir=/proc/self/fd/7,upperdir=/proc/self/fd/8,workdir=/proc/self/fd/9,volatile", []string{"volatile"}},
		{"rw,lowerdir=/proc/self/fd/7,upperdir=/proc/self/fd/8,workdir=/proc/self/fd/9,uuid=on,fsync=volatile", []string{"volatile"}},
		{"rw,lowerdir=/a,upperdir=/b,workdir=/c,userxattr", []string{"userxattr"}},
		{"rw,lowerdir=/a,upperdir=/b,workdir=/c,fsync=auto", nil},
	} {
		if got := overlayFlags(strings.Split(c.super, ",")); !slices.Equal(got, c.want) {
			t.Errorf("overlayFlags(%s) = %q, want %q", c.super, got, c.want)
		}
	}
}
