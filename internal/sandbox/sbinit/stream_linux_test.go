package sbinit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// TestFlowKeepsWhatIsNotAcknowledged: a streaming exec's flow keeps each
// chunk it sent until an acknowledgement reaches past it (by offset, or
// one chunk for an acknowledgement without one), sends the ones kept
// again, in order, with their offsets (wire.OpAttach), and lists the exec
// under its key with what was acknowledged and sent (wire.OpExecs).
func TestFlowKeepsWhatIsNotAcknowledged(t *testing.T) {
	var fs flows
	ctx := fs.open(context.Background(), &wire.Request{ID: 7, Op: wire.OpExec, Stream: true, Key: "k"})
	fs.open(context.Background(), &wire.Request{ID: 8, Op: wire.OpSessionExec}) // no stream: not listed
	var buf bytes.Buffer
	out := wire.NewWriter(&buf)
	f := fs.get(7)
	for _, s := range []string{"ab", "cde", "f", "gh"} {
		f.send(ctx, out, 7, s == "f", []byte(s))
	}
	if got := frames(t, &buf); got != "0:stdout:ab 2:stdout:cde 5:stderr:f 6:stdout:gh" {
		t.Fatalf("sent %s", got)
	}
	fs.signal(&wire.Request{Op: wire.OpStreamAck, Ref: 7, Off: 5}, out) // past ab and cde
	fs.signal(&wire.Request{Op: wire.OpStreamAck, Ref: 7}, out)         // one: f
	if got := fs.list(); len(got) != 1 || got[0] != (wire.ExecState{ID: 7, Key: "k", Acked: 6, Sent: 8}) {
		t.Fatalf("listed %+v, want exec 7 under k, 6 acknowledged of 8", got)
	}
	if n := len(f.inflight); n != 1 {
		t.Fatalf("%d chunks in the window, want 1 (gh)", n)
	}
	f.resend(out, 7)
	if got := frames(t, &buf); got != "6:stdout:gh" {
		t.Fatalf("sent again %s, want gh at 6", got)
	}
	if f.total() != 8 {
		t.Fatalf("total %d, want 8", f.total())
	}
}

// frames reads the chunks written to buf as "off:stream:data" words.
func frames(t *testing.T, buf *bytes.Buffer) string {
	t.Helper()
	var words []string
	for {
		var r wire.Response
		err := wire.ReadFrame(buf, &r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		words = append(words, fmt.Sprintf("%d:%s:%s", r.Off, r.Stream, r.Data))
	}
	return strings.Join(words, " ")
}

// TestFlowDrainedWaitsForAcknowledgements: an exec's final Response
// waits (drained) until its output is acknowledged, since the flow, which
// the exec's end closes, is what keeps the chunks a restored sandbox's
// host has sent again (wire.OpAttach): a command that ended between a
// dump and its attach would else leave a gap that its attach waits on
// for ever. An end of the exec's context (its cancel, the connection's
// end) ends the wait.
func TestFlowDrainedWaitsForAcknowledgements(t *testing.T) {
	var fs flows
	ctx := fs.open(context.Background(), &wire.Request{ID: 7, Op: wire.OpExec, Stream: true, Key: "k"})
	f := fs.get(7)
	out := wire.NewWriter(io.Discard)
	f.drained(ctx) // nothing sent: at once
	for _, s := range []string{"ab", "cde"} {
		f.send(ctx, out, 7, false, []byte(s))
	}
	done := make(chan struct{})
	go func() {
		f.drained(ctx)
		close(done)
	}()
	fs.signal(&wire.Request{Op: wire.OpStreamAck, Ref: 7, Off: 2}, out) // ab only
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("drained returned with cde not acknowledged")
	default:
	}
	fs.signal(&wire.Request{Op: wire.OpStreamAck, Ref: 7, Off: 5}, out)
	<-done

	f.send(ctx, out, 7, false, []byte("f"))
	fs.signal(&wire.Request{Op: wire.OpCancel, Ref: 7}, out)
	f.drained(ctx) // cancelled: returns with f unacknowledged
}
