package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// testCallsShareTheReader: one goroutine at a time reads the control
// socket, a caller alone reading its own response (see conn). A call
// waiting while another reads gets its response handed on; a caller whose
// context ends while it reads returns, and the response that comes later
// is read past by the next calls.
func testCallsShareTheReader(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	slow := make(chan string, 1)
	go func() {
		res, err := sb.Exec(ctx, session.ExecRequest{Command: "sleep 0.5; echo slow"})
		if err != nil {
			slow <- err.Error()
			return
		}
		slow <- res.Output
	}()
	time.Sleep(100 * time.Millisecond) // the slow call reads by then, most likely
	for i := range 3 {
		if got := mustOK(t, sb, fmt.Sprintf("echo %d", i)); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("a call made while another reads: %q", got)
		}
	}
	if got := <-slow; got != "slow\n" {
		t.Fatalf("the call that read for the others: %q", got)
	}

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := sb.Exec(cctx, session.ExecRequest{Command: "sleep 0.6; echo late"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose context ended: %v, want context.DeadlineExceeded", err)
	}
	for i := range 3 { // the late answer arrives during the second
		want := fmt.Sprintf("after %d\n", i)
		if got := mustOK(t, sb, "sleep 0.3; echo after "+fmt.Sprint(i)); got != want {
			t.Fatalf("call %d after the cancelled one: %q, want %q", i, got, want)
		}
	}
}
