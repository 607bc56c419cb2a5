package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// TestForkOwnsRegistryProxy starts a task sandbox from the config of
// another with the host's network, as the engine's fork does (Start, with
// a shell reopened in the environment the parent's had), closes the
// parent, and has cargo fetch a crate new to the layers in the child: the
// crate comes from crates.io through the child's own registry proxy (the
// layers name crates.io by regproxy.CargoHost, which only a proxy answers),
// not the parent's, stopped with it.
func TestForkOwnsRegistryProxy(t *testing.T) {
	env := langEnv(t)
	ctx := context.Background()
	_, tk := rustProject.task(t)
	parent, err := Open(ctx, env, tk, Options{Network: sandbox.NetworkHost})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	// What a snapshot records of a session: its shell's environment.
	res, err := parent.Exec(ctx, session.ExecRequest{Command: "env", Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("env in the parent: %v, exit %d:\n%s", err, res.ExitCode, res.Output)
	}
	recorded := strings.Split(strings.TrimSpace(res.Output), "\n")

	// The child's layers: the same cache entries, under a lease of its own.
	prep, err := env.Cache.Prepare(ctx, tk.Instance, tk.Spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	conf := parent.Config()
	conf.UpperDir, conf.KeepUpper, conf.Hostname = "", false, ""
	child, err := Start(ctx, env, tk, conf, prep.Lease)
	if err != nil {
		prep.Release()
		t.Fatal(err)
	}
	defer child.Close()
	if err := child.OpenSession(ctx, "shell", sandbox.SessionOptions{Env: WithoutRegistryProxy(recorded)}); err != nil {
		t.Fatal(err)
	}
	if err := parent.Close(); err != nil {
		t.Fatal(err)
	}

	res, err = child.SessionExec(ctx, "shell", session.ExecRequest{Timeout: 5 * time.Minute,
		Command: `cd /testbed && echo 'ryu = "=1.0.18"' >> Cargo.toml && cargo fetch 2>&1`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cargo fetch of a new crate in the child after its parent closed: %v, exit %d:\n%s", err, res.ExitCode, res.Output)
	}
}
