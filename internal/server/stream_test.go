package server

import (
	"context"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestServerStreamBounded streams 300 MB of output from a sandbox of 256
// MiB through the API: the output is relayed with back-pressure, not kept
// (before, it went to a file in the sandbox's /tmp, whose tmpfs pages the
// memory limit counts, and the OOM killer took the sandbox's init), the
// sandbox answers the next command, and a cap on the output truncates the
// result with its flag set while the stream carries everything.
func TestServerStreamBounded(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	const total = 300 << 20
	var got int64
	bad := 0
	res, err := c.ExecStream(ctx, info.ID, api.ExecRequest{Command: `head -c 300M /dev/zero | tr '\0' a`}, func(ev api.ExecEvent) {
		got += int64(len(ev.Data))
		if ev.Type != api.EventStdout || strings.Trim(ev.Data, "a") != "" {
			bad++
		}
	})
	if err != nil || res.ExitCode != 0 || !res.Truncated {
		t.Fatalf("streaming 300 MB in a 256 MiB sandbox: %v %+v", err, res.ExitCode)
	}
	if got != total || bad != 0 {
		t.Fatalf("the stream carried %d bytes (%d events not of the output), want %d", got, bad, total)
	}
	if res, err := c.Exec(ctx, info.ID, api.ExecRequest{Command: "echo alive"}); err != nil || res.Stdout != "alive\n" {
		t.Fatalf("the next command: %v %+v", err, res)
	}

	var streamed strings.Builder
	res, err = c.ExecStream(ctx, info.ID, api.ExecRequest{Command: "seq 1 2000; echo e >&2", MaxOutput: 1000, SeparateStderr: true}, func(ev api.ExecEvent) {
		if ev.Type == api.EventStdout {
			streamed.WriteString(ev.Data)
		}
	})
	if err != nil || !res.Truncated || len(res.Stdout) > 1100 || res.Stderr != "e\n" {
		t.Fatalf("capped stream: %v truncated=%v stdout of %d bytes, stderr %q", err, res.Truncated, len(res.Stdout), res.Stderr)
	}
	if !strings.HasPrefix(res.Stdout, "1\n2\n") || !strings.HasSuffix(res.Stdout, "1999\n2000\n") || !strings.Contains(res.Stdout, "omitted") {
		t.Fatalf("capped result keeps neither head nor tail: %q", res.Stdout)
	}
	if n := strings.Count(streamed.String(), "\n"); n != 2000 {
		t.Fatalf("the capped exec streamed %d lines, want all 2000", n)
	}
}
