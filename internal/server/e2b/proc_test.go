package e2b

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

func outEvent(s string) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
		Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(s)}}}}
}

// collect follows p from offset from until its end, or until stop events
// were sent when stop > 0, and returns the output it sent.
func collect(t *testing.T, p *proc, from int64, stop int) string {
	t.Helper()
	var out strings.Builder
	n := 0
	errStop := errors.New("stop")
	err := p.follow(context.Background(), from, func(ev *process.ProcessEvent) error {
		if stop > 0 && n == stop {
			return errStop
		}
		n++
		out.Write(ev.GetData().GetStdout())
		if ev.GetEnd() != nil {
			out.WriteString("<end>")
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	return out.String()
}

// TestProcLog: a process's log keeps at most maxLog of output, a stream
// that connects resumes at the first event no stream sent, and every
// stream of an ended process gets its end.
func TestProcLog(t *testing.T) {
	p := newProc(1, "", &process.ProcessConfig{Cmd: "x"}, func() {})
	p.add(outEvent("a"), false)
	p.add(outEvent("b"), false)
	p.add(outEvent("c"), false)
	if got := collect(t, p, 0, 2); got != "ab" {
		t.Fatalf("a first stream that left after two events sent %q", got)
	}
	if at := p.resumeAt(); at != 2 {
		t.Errorf("resumeAt after two sent events: %d, want 2", at)
	}
	p.add(endEvent(0, "exit status 0", ""), true)
	if got := collect(t, p, p.resumeAt(), 0); got != "c<end>" {
		t.Errorf("a reconnecting stream sent %q, want c and the end", got)
	}
	if got := collect(t, p, p.resumeAt(), 0); got != "<end>" {
		t.Errorf("a stream after everything was sent sent %q, want just the end", got)
	}
	if len(p.log) != 1 {
		t.Errorf("an ended process whose every event was sent keeps %d events, want only its end", len(p.log))
	}

	big := newProc(2, "", &process.ProcessConfig{Cmd: "x"}, func() {})
	chunk := strings.Repeat("x", maxLog/4)
	for range 6 {
		big.add(outEvent(chunk), false)
	}
	big.add(endEvent(0, "exit status 0", ""), true)
	if big.size > maxLog || big.first != 2 {
		t.Errorf("after 1.5 maxLog of output the log holds %d bytes from offset %d, want at most %d from 2", big.size, big.first, maxLog)
	}
	if got := collect(t, big, 0, 0); len(got) != 4*len(chunk)+len("<end>") {
		t.Errorf("a stream from offset 0 sent %d bytes, want the %d kept and the end", len(got), 4*len(chunk))
	}
}
