package sandbox

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// TestBeginReset: a reset begun (BeginReset) ends the sandbox's processes
// and holds back new ones until it is finished or aborted. Aborted, the
// sandbox goes on in its old root; finished, in the new one, where a
// command sent meanwhile runs; a reset is over once finished; layers it
// cannot take abort it.
func TestBeginReset(t *testing.T) {
	sb, base, top := resetSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustOK(t, sb, "echo old > /old; setsid sleep 1000 </dev/null >/dev/null 2>&1 &")

	r, err := sb.BeginReset(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, sb, "cat /old; pgrep -x sleep || echo none"); got != "old\nnone\n" {
		t.Fatalf("after an aborted reset the sandbox sees %q, want its old root without its processes", got)
	}

	r, err = sb.BeginReset(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan session.Result, 1)
	go func() { ran <- sh(t, sb, "cat /f; ls /old 2>/dev/null | wc -l") }()
	select {
	case res := <-ran:
		t.Fatalf("a command ran during the reset: %q", res.Output)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := r.Finish(ctx, Deferred{Layers: []string{base, top}}); err != nil {
		t.Fatal(err)
	}
	if res := <-ran; res.Output != "top\n0\n" {
		t.Fatalf("the command sent during the reset saw %q, want the new root's", res.Output)
	}
	if _, err := r.Finish(ctx, Deferred{Layers: []string{base}}); err == nil {
		t.Fatal("a reset finished twice")
	}
	if err := r.Abort(); err != nil {
		t.Fatalf("abort of a finished reset: %v", err)
	}

	r, err = sb.BeginReset(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, Deferred{Layers: []string{filepath.Join(base, "missing")}}); err == nil {
		t.Fatal("a reset onto a missing layer finished")
	}
	if got := mustOK(t, sb, "cat /f"); got != "top\n" {
		t.Fatalf("after a reset onto a missing layer the sandbox sees %q, want its root as it was", got)
	}
	if got := sb.Config().Layers; len(got) != 2 || got[1] != top {
		t.Fatalf("layers %v after a failed reset, want %v", got, []string{base, top})
	}
}
