package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// testFreezeWritableDir: the host reads what the sandbox writes to its
// root in WritableDir (pool volume, host dir, or disk tmpfs through
// init's descriptor); Freeze stops a writer that appends to a file
// without pause (the file stops growing, whatever the mode: cgroup v2 or
// v1 freezer, or SIGSTOP without one) and thaw lets it go on.
func testFreezeWritableDir(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	dir, err := sb.WritableDir()
	if err != nil {
		t.Fatal(err)
	}
	// In a session: a fresh bash's background jobs end with it.
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "w", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.SessionExec(ctx, "w", session.ExecRequest{Command: `(while :; do echo x >>/w.log; done) >/dev/null 2>&1 &`}); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := os.Stat(filepath.Join(dir, "w.log"))
		if err != nil {
			return 0
		}
		return st.Size()
	}
	grows := func(from int64) {
		t.Helper()
		for i := 0; size() <= from; i++ {
			if i == 5000 {
				t.Fatalf("w.log in %s did not grow past %d bytes", dir, from)
			}
			time.Sleep(time.Millisecond)
		}
	}
	grows(0)
	thaw, err := sb.Freeze(ctx)
	if err != nil {
		thaw()
		t.Fatal(err)
	}
	frozen := size()
	time.Sleep(50 * time.Millisecond)
	got := size()
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	if got != frozen {
		t.Fatalf("w.log grew from %d to %d bytes while frozen", frozen, got)
	}
	grows(got)
}
