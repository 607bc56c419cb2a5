package e2b

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// startFrontDemo is startFront on an engine that knows the demo project's
// instances (built once per test binary, in the fixture's cache); it
// returns the URL and the first instance's id.
func startFrontDemo(t *testing.T) (string, string) {
	t.Helper()
	g := gen.Generated(t)
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(g.PyVersion)))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(context.Background(), engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(gen.Dir(), "cache")}, Overrides: ov})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(g.Instances...); err != nil {
		e.Close()
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(e, testKey, nil).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return "http://" + l.Addr().String(), g.Instances[0].InstanceID
}

// TestE2BNetworkTemplates: network rules hold on every kind of template,
// as on base: an msb instance's task sandbox (and after its pause and
// connect), a sandbox created from a snapshot of a base sandbox and one
// from a snapshot of a task sandbox; an allowed and a denied listener on
// the host's loopback each.
func TestE2BNetworkTemplates(t *testing.T) {
	t.Setenv("MSB_TEST_OPEN_PORT", strconv.Itoa(privtest.ServeOK(t)))
	t.Setenv("MSB_TEST_CLOSED_PORT", strconv.Itoa(privtest.ServeOK(t)))
	url, instance := startFrontDemo(t)
	out := sdkScriptAt(t, url, "sdk_network_templates.py", instance)
	var got map[string][2]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	for _, k := range []string{"instance", "instance_resumed", "base_snapshot", "instance_snapshot"} {
		allowed, denied := got[k][0], got[k][1]
		if allowed != "ok" || !strings.Contains(denied, "refused") {
			t.Errorf("%s: the allowed port said %q, the denied one %q; want ok and connection refused", k, allowed, denied)
		}
	}
	if got["instance_cwd"][0] != "/testbed" {
		t.Errorf("a command in the instance's sandbox ran in %q, want its repository /testbed", got["instance_cwd"][0])
	}
}
