package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/harness"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
)

// gateEnv names the gate directory TestRootlessValidationFlaky makes for
// its unprivileged rerun of TestEngineValidationFlaky (which cannot make
// one under /usr/local itself).
const gateEnv = "MSB_TEST_FLAKY_GATE"

// TestRootlessValidationFlaky reruns TestEngineValidationFlaky as an
// unprivileged user, with a gate directory made for it.
func TestRootlessValidationFlaky(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestEngineValidationFlaky covers the rootless mode")
	}
	dir := gateDir(t)
	uid, gid := privtest.UserIDs(t)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	privtest.UnprivilegedEnv(t, "^TestEngineValidationFlaky$", gateEnv+"="+dir)
}

// gateDir is a new directory under /usr/local/share, a host directory an
// evaluation sandbox sees read-only (sandbox.DefaultHostDirs): what the
// test puts there between two evaluations, their tests see, and no
// sandbox can change it.
func gateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/usr/local/share", "msb-test-gate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEngineValidationFlaky: an instance whose tests fail on the gold
// patch's first evaluation without network and pass on every later one (a
// flake, made deterministic by a gate file the test opens on the host once
// that evaluation ended) is rechecked with the host's network, resolves,
// and resolves again on a second evaluation without network: it is
// invalid as flaky, not needs_network, and names the tests that changed.
// An instance whose tests need the network (a listener on the host's
// loopback) fails that second evaluation: needs_network.
func TestEngineValidationFlaky(t *testing.T) {
	dir := os.Getenv(gateEnv)
	switch {
	case dir == "" && os.Geteuid() != 0:
		t.Skip("the unprivileged rerun of TestRootlessValidationFlaky runs this test, with its gate directory")
	case dir == "":
		dir = gateDir(t)
	}
	gate := filepath.Join(dir, "open")
	port := privtest.ServeOK(t)
	g := generated(t)
	flaky, netw := g.Instances[1], g.Instances[1]
	flaky.InstanceID, netw.InstanceID = "demo__calc-flaky", "demo__calc-needsnet"
	extra := fmt.Sprintf("instances:\n  %s:\n    test_cmd: \"test -e %s && python -m unittest -v\"\n"+
		"  %s:\n    test_cmd: \"python -c 'import socket; socket.create_connection((\\\"127.0.0.1\\\", %d), 5)' && python -m unittest -v\"\n",
		flaky.InstanceID, gate, netw.InstanceID, port)
	e := openEngine(t, extra, nil)
	if err := e.Add(flaky, netw); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	progress := func(_, _ int, res api.EvalResult) {
		// The first gold evaluation of the flaky instance has ended: every
		// later one passes the gate.
		if res.InstanceID == flaky.InstanceID && res.Model == "gold" {
			once.Do(func() {
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Error(err)
				}
			})
		}
	}
	out := harness.New(t.TempDir())
	rep, err := e.RunValidation(context.Background(), ValidateRun{RunID: "v", InstanceIDs: []string{flaky.InstanceID, netw.InstanceID},
		Workers: 2, Progress: progress}, out)
	if err != nil {
		t.Fatal(err)
	}
	both := []string{netw.InstanceID, flaky.InstanceID}
	slices.Sort(both)
	if len(rep.Valid) != 0 || !slices.Equal(rep.NetworkRechecked, both) || !slices.Equal(rep.OfflineRechecked, both) || len(rep.Validations) != 2 {
		t.Fatalf("validation: %+v", rep)
	}
	for _, v := range rep.Validations {
		switch v.InstanceID {
		case flaky.InstanceID:
			if v.Valid || v.NeedsNetwork || !v.Flaky || !strings.HasPrefix(v.Reason, "flaky:") || v.Gold.Outcome != api.OutcomeUnresolved ||
				!slices.Contains(v.FlakyTests, flaky.FailToPass[0]) {
				t.Errorf("flaky instance: %+v", v)
			}
		case netw.InstanceID:
			if v.Valid || !v.NeedsNetwork || v.Flaky || len(v.FlakyTests) != 0 || !strings.Contains(v.Reason, "fails only without network") {
				t.Errorf("network instance: %+v", v)
			}
		}
	}
	// The second evaluations without network are a run of their own.
	for id, want := range map[string]api.Outcome{flaky.InstanceID: api.OutcomeResolved, netw.InstanceID: api.OutcomeUnresolved} {
		res, ok, err := out.Lookup(context.Background(), "v"+OfflineRecheckSuffix, "gold", id)
		if err != nil || !ok || res.Outcome != want || res.Network != sandbox.NetworkNone {
			t.Errorf("stored second offline run of %s: %v %v %+v", id, err, ok, res)
		}
	}
	// One instance alone is judged the same way (the gate stays open: its
	// first evaluation passes, and nothing is rechecked).
	if v, err := e.Validate(context.Background(), netw.InstanceID); err != nil || v.Valid || !v.NeedsNetwork || v.Flaky {
		t.Fatalf("single validation: %v %+v", err, v)
	}
	if v, err := e.Validate(context.Background(), flaky.InstanceID); err != nil || !v.Valid || v.Flaky {
		t.Fatalf("single validation of the flaky instance, gate open: %v %+v", err, v)
	}
}
