package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// testStreamBackPressure: while ExecStream's emit blocks, the command
// blocks in its writes after a few reads of output (wire.StreamWindow),
// instead of the sandbox or the host buffering what it prints; released,
// the whole output arrives in order and the exec ends normally.
func testStreamBackPressure(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	// 200 rounds of 64 KiB (12.5 MiB) are eight times the window and more
	// than the 1 MiB cap; more only slows the test (in TestCgroupV2's
	// emulated VM, 2000 rounds took 12 minutes).
	const rounds, chunk = 200, 65536
	cmd := "for i in $(seq 1 " + strconv.Itoa(rounds) + "); do head -c " + strconv.Itoa(chunk) + " /dev/zero; echo $i >/tmp/progress; done"
	blocked, release := make(chan struct{}), make(chan struct{})
	type outcome struct {
		res session.Result
		n   int
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		n := 0
		res, err := sb.ExecStream(ctx, session.ExecRequest{Command: cmd}, func(stderr bool, p []byte) {
			if n == 0 {
				close(blocked)
				<-release
			}
			n += len(p)
		})
		done <- outcome{res, n, err}
	}()
	<-blocked
	// Wait for a writer asleep (in the full pipe): head from /dev/zero
	// sleeps nowhere else.
	for i := 0; ; i++ {
		select {
		case o := <-done:
			close(release)
			t.Fatalf("the exec ended while its output was not read: %v %+v", o.err, o.res.ExitCode)
		default:
		}
		if strings.Contains(mustOK(t, sb, `cat /proc/[0-9]*/stat 2>/dev/null | awk '$2 == "(head)" { print $3 }'`), "S") {
			break
		}
		if i == 1000 {
			close(release)
			t.Fatal("no writer blocked while the output was not read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	progress, err := strconv.Atoi(strings.TrimSpace(mustOK(t, sb, "cat /tmp/progress 2>/dev/null || echo 0")))
	close(release)
	if err != nil || progress > 3*8 {
		t.Fatalf("the command wrote %d rounds of 64 KiB while nothing read its output (%v); the window is a few", progress, err)
	}
	o := <-done
	if o.err != nil || o.res.ExitCode != 0 || o.n != rounds*chunk || !o.res.Truncated {
		t.Fatalf("after the release: %v exit %d, %d bytes streamed of %d, truncated %v", o.err, o.res.ExitCode, o.n, rounds*chunk, o.res.Truncated)
	}
}

// testStreamCancelWaits: a cancelled ExecStream returns once its command
// and what it started are dead, so its caller finds nothing of it left;
// here a command that ignores SIGINT lives until the kill grace's SIGKILL.
func testStreamCancelWaits(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := sb.ExecStream(ctx, session.ExecRequest{Command: "trap '' INT; sleep 60 & echo started; wait"}, func(stderr bool, p []byte) {
			if strings.Contains(string(p), "started") {
				close(started)
			}
		})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("the cancelled exec returned %v, want context.Canceled", err)
	}
	if n := mustOK(t, sb, `ps -eo args | grep -c '^sleep 60' || true`); n != "0\n" {
		t.Fatalf("right after the cancelled exec returned: %q of its sleeps alive, want none", n)
	}
}
