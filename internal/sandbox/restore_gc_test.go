package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestGCUnmountsRestored: a restored sandbox whose msb died leaves its
// disk and root overlay mounted in its state dir (Runtime.Restore mounts
// them on the host); GC unmounts them, then removes the dir, without
// emptying the overlay's lower layer.
func TestGCUnmountsRestored(t *testing.T) {
	privtest.RequireRoot(t)
	state := privtest.StateDir(t)
	rt, err := NewRuntime(RuntimeOptions{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := filepath.Join(state, "0123456789abcdef")
	lower := t.TempDir()
	if err := os.WriteFile(filepath.Join(lower, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	disk, root := filepath.Join(dir, "disk"), filepath.Join(dir, "root")
	for _, d := range []string{disk, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600); err != nil { // a lock nobody holds: its owner died
		t.Fatal(err)
	}
	if err := mount.Tmpfs(disk, 0, "size=1m").Mount(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"upper", "work"} {
		os.Mkdir(filepath.Join(disk, d), 0o755)
	}
	ov, err := mount.Overlay(root, mount.OverlayOptions{Lowers: []string{lower}, Upper: filepath.Join(disk, "upper"), Work: filepath.Join(disk, "work")})
	if err == nil {
		err = ov.Mount()
	}
	if err != nil {
		t.Fatal(err)
	}
	rep := rt.GC()
	if len(rep.Errors) > 0 || !slices.Contains(rep.Sandboxes, dir) {
		t.Errorf("GC: %+v, want %s removed without errors", rep, dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the state dir after GC: %v", err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), dir) {
		t.Errorf("mounts of %s are left after GC", dir)
	}
	if _, err := os.Stat(filepath.Join(lower, "kept")); err != nil {
		t.Errorf("the overlay's lower layer after GC: %v", err)
	}
}
