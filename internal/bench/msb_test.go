package bench

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestMSBCloseIncludesTeardown checks that an msb task's close, which
// the ready measure times and throughput counts, returns only once the
// sandbox's cleanup is done (the state dir gone), as the paper's rm -rf
// and podman rm -f are done when they return.
func TestMSBCloseIncludesTeardown(t *testing.T) {
	rt := testRuntime(t)
	m := &msbMethod{rt: rt, wl: bareWorkload(), session: true}
	ctx := context.Background()
	task, err := m.create(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	mt := task.(*msbTask)
	if err := task.run(ctx, "true"); err != nil {
		t.Error(err)
	}
	if err := task.close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mt.sb.Cleaned():
	default:
		t.Fatal("close returned before the sandbox's cleanup was done: its time leaves the teardown out")
	}
	if _, err := os.Stat(mt.state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the sandbox's state dir %s is still there after close (%v)", mt.state, err)
	}
}
