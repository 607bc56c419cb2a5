package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/warm"
)

// TestCreateSandboxSession: a create that names a session opens it, on a
// raw sandbox, an instance's and a spare taken from the pool, as an
// OpenSession after the create would; a bad name is refused before
// anything starts.
func TestCreateSandboxSession(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.Spares = 2 })
	ctx := context.Background()
	in := generated(t).Instances[0].InstanceID
	for _, tc := range []struct {
		name string
		req  SandboxRequest
	}{
		{"raw", SandboxRequest{HostBase: true, Workdir: "/tmp"}},
		{"instance", SandboxRequest{InstanceID: in}},
		{"spare", SandboxRequest{InstanceID: in, Warm: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := e.Stats().SpareSessions
			if tc.name == "spare" { // the first create leaves a spare, the second takes it
				s, err := e.CreateSandbox(ctx, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				waitPool(t, e, PoolInstance, "1 ready", func(st warm.Stats) bool { return st.Spares == 1 && st.Making == 0 })
			}
			req := tc.req
			req.Session = "main"
			s, err := e.CreateSandbox(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Info().Sessions; !slices.Equal([]string(got), []string{"main"}) {
				t.Errorf("sessions %v, want [main]", got)
			}
			res, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "x=1; pwd"})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec in main: %+v, %v", res, err)
			}
			if res, _ := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "echo $x"}); res.Stdout != "1\n" {
				t.Fatalf("the session's state did not carry over: %q", res.Stdout)
			}
			if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err == nil {
				t.Error("main opened twice")
			}
			if got := e.Stats().SpareSessions - taken; (tc.name == "spare") != (got == 1) {
				t.Errorf("spares' sessions taken: %d", got)
			}
			t.Logf("%s: cwd %q", tc.name, res.Stdout)
		})
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true, Session: "-bad name"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a bad session name: %v, want ErrBadRequest", err)
	}
}
