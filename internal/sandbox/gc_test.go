package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// deadDir makes, in rt's state dir, what a sandbox whose owner died leaves:
// a dir named like a sandbox with a lock nobody holds and info (when not
// nil) as its info.json. It returns the dir.
func deadDir(t *testing.T, rt *Runtime, name string, info *stateInfo) string {
	t.Helper()
	dir := filepath.Join(rt.StateDir(), name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if info != nil {
		b, _ := json.Marshal(info)
		if err := os.WriteFile(filepath.Join(dir, "info.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testGCPidReused: a dead owner's info.json names a pid that now belongs to
// another live sandbox's init (same command line, another start time). GC
// removes the dead dir and kills nothing: the live sandbox still answers.
func testGCPidReused(t *testing.T, rt *Runtime) {
	live := create(t, rt, Config{HostBase: true})
	start, err := procStart(live.InitPid())
	if err != nil {
		t.Fatal(err)
	}
	dir := deadDir(t, rt, "gc-pid-reused-"+live.ID, &stateInfo{InitPid: live.InitPid(), InitStart: start + 1, Created: time.Now()})
	rep := rt.GC()
	if !slices.Contains(rep.Sandboxes, dir) || len(rep.Processes) != 0 {
		t.Fatalf("gc report %+v: want %s removed and no process killed", rep, dir)
	}
	if got := mustOK(t, live, "echo alive"); got != "alive\n" {
		t.Fatalf("the live sandbox answered %q", got)
	}
}

// testGCOwnerRemoving: an owner that is removing its dir has unlinked the
// lock file already; GC must not take the dir for a dead owner's (it once
// made a new lock file, took it, and counted the dir).
func testGCOwnerRemoving(t *testing.T, rt *Runtime) {
	dir := deadDir(t, rt, "gc-owner-removing", nil)
	os.Remove(filepath.Join(dir, "lock"))
	if rep := rt.GC(); slices.Contains(rep.Sandboxes, dir) {
		t.Fatalf("gc took a dir being removed by its owner: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); err == nil {
		t.Fatal("gc made a lock file in a dir it does not own")
	}
	// Left untouched for longer than an owner takes, it is abandoned.
	old := time.Now().Add(-2 * staleNewDir)
	os.Chtimes(dir, old, old)
	if rep := rt.GC(); !slices.Contains(rep.Sandboxes, dir) {
		t.Fatalf("gc kept an abandoned dir: %+v", rep)
	}
}

// testGCNewDirs: a dir a sandbox's creation made before its owner took the
// lock is left alone while young, collected once old with its lock free,
// and never while its lock is held.
func testGCNewDirs(t *testing.T, rt *Runtime) {
	young := deadDir(t, rt, newDirPrefix+"young", nil)
	held := deadDir(t, rt, newDirPrefix+"held", nil)
	abandoned := deadDir(t, rt, newDirPrefix+"abandoned", nil)
	old := time.Now().Add(-2 * staleNewDir)
	for _, d := range []string{held, abandoned} {
		os.Chtimes(d, old, old)
	}
	release, ok := tryLock(held)
	if !ok {
		t.Fatal("could not take the lock of", held)
	}
	defer release()
	rep := rt.GC()
	if slices.Contains(rep.Sandboxes, young) || slices.Contains(rep.Sandboxes, held) || !slices.Contains(rep.Sandboxes, abandoned) {
		t.Fatalf("gc report %+v: want only %s removed", rep, abandoned)
	}
}

// TestProcStart: the start time read from /proc is this process's, and
// stable (a command name with spaces and parentheses cannot shift it).
func TestProcStart(t *testing.T) {
	a, err := procStart(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("procStart: %d, %v", a, err)
	}
	if b, _ := procStart(os.Getpid()); b != a {
		t.Fatalf("start time changed: %d then %d", a, b)
	}
	if _, err := procStart(-1); err == nil {
		t.Fatal("no error for a pid that cannot exist")
	}
}
