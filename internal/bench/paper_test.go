package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox"
)

// TestPaperSpawnsOnlyItsMounts checks that the paper's shell is started
// the way its code starts it: unshare, sh, one mount per mount, chroot and
// bash, and no other process (no mkdir, ln or readlink). PIDs in the
// task's new PID namespace count the processes: sh is 1 (and becomes
// chroot, then bash), each mount takes the next, so the first process the
// shell starts is 2 + the number of mounts.
func TestPaperSpawnsOnlyItsMounts(t *testing.T) {
	rt := testRuntime(t)
	m := &paperMethod{wl: bareWorkload(), tasks: t.TempDir(), rootless: rt.Rootless()}
	ctx := context.Background()
	task, err := m.create(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := task.close(); err != nil {
			t.Error(err)
		}
	}()
	if err := task.run(ctx, `/bin/sh -c 'echo $$ >/tmp/pid'`); err != nil {
		t.Fatal(err)
	}
	dir := task.(*paperTask).dir
	b, err := os.ReadFile(filepath.Join(dir, "tmp", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	binds := 0
	for _, x := range sandbox.DefaultHostDirs {
		if fi, err := os.Lstat(x); err == nil && fi.IsDir() {
			binds++
		}
	}
	mounts := binds + 2 // the system dirs, /dev and /proc
	if want := 2 + mounts; pid != want {
		t.Errorf("the shell's first child has pid %d in the task's PID namespace, want %d: %d processes ran besides one mount per mount (%d)",
			pid, want, pid-want, mounts)
	}
}
