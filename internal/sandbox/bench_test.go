package sandbox

import (
	"context"
	"testing"

	"github.com/minisandbox/msb/internal/session"
)

// BenchmarkCreateExecClose measures a sandbox's whole life: create, answer
// one command, close.
func BenchmarkCreateExecClose(b *testing.B) {
	rt := testRuntime(b)
	ctx := context.Background()
	for b.Loop() {
		sb, err := rt.Create(ctx, Config{HostBase: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Exec(ctx, session.ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionTrue measures a round trip of `true` in a persistent
// session of a running sandbox.
func BenchmarkSessionTrue(b *testing.B) {
	rt := testRuntime(b)
	ctx := context.Background()
	sb := create(b, rt, Config{HostBase: true})
	if err := sb.OpenSession(ctx, "b", SessionOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.SessionExec(ctx, "b", session.ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
