package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/harness"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// TestEngineSandboxes drives sandboxes through the engine as a server
// would: a task sandbox for an instance and a raw one, labels, listing,
// sessions, files, the agent's patch evaluated in a fresh sandbox, close.
func TestEngineSandboxes(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	id := generated(t).Instances[0].InstanceID
	agent, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Labels: map[string]string{"job": "a", "kind": "agent"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := e.CreateSandbox(ctx, SandboxRequest{Labels: map[string]string{"job": "a"}, Limits: api.Limits{MemoryBytes: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Sandboxes(map[string]string{"job": "a"}); len(got) != 2 {
		t.Fatalf("sandboxes of job a: %+v", got)
	}
	if got := e.Sandboxes(map[string]string{"kind": "agent"}); len(got) != 1 || got[0].ID != agent.ID() || got[0].InstanceID != id {
		t.Fatalf("agent sandboxes: %+v", got)
	}
	if info := raw.Info(); info.Limits.MemoryBytes != 256<<20 || info.Limits.Pids != sandbox.DefaultLimits.Pids || info.InstanceID != "" {
		t.Fatalf("raw info: %+v", info)
	}
	if s, err := e.Sandbox(agent.ID()); err != nil || s != agent {
		t.Fatalf("get: %v", err)
	}
	if _, err := raw.Diff(ctx); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("raw diff: %v", err)
	}
	// The agent works in a session in /testbed, with the venv on PATH.
	if err := agent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	res, err := agent.Exec(ctx, api.ExecRequest{Session: "main", Command: `pwd; python -c 'import sys; print(sys.prefix)'; sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py`, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "/testbed\n/opt/msb/venv") {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if info := agent.Info(); len(info.Sessions) != 1 || info.Sessions[0] != "main" {
		t.Fatalf("sessions %v", info.Sessions)
	}
	if err := agent.WriteFile(ctx, "/testbed/NOTES.txt", []byte("done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := agent.ReadFile(ctx, "/testbed/NOTES.txt", 0); err != nil || string(b) != "done\n" {
		t.Fatalf("read back %q %v", b, err)
	}
	ents, err := agent.ListDir(ctx, "/testbed")
	if err != nil || !hasEntry(ents, "NOTES.txt") {
		t.Fatalf("list: %v %+v", err, ents)
	}
	result, art, err := agent.Evaluate(ctx, "agent")
	if err != nil || result.Outcome != api.OutcomeResolved || !strings.Contains(art.Patch, "b/NOTES.txt") {
		t.Fatalf("the agent's patch: %v %s %s\n%s", err, result.Outcome, result.Detail, art.Patch)
	}
	// Evaluating did not touch the agent's sandbox: the session goes on.
	if res, err := agent.Exec(ctx, api.ExecRequest{Session: "main", Command: "git status --short | wc -l"}); err != nil || strings.TrimSpace(res.Stdout) != "2" {
		t.Fatalf("after evaluate: %v %+v", err, res)
	}
	if _, err := e.CloseSandbox(agent.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sandbox(agent.ID()); !errors.Is(err, ErrGone) {
		t.Fatalf("closed sandbox still there: %v", err)
	}
	if _, err := e.Sandbox("never-was"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown sandbox: %v", err)
	}
	if _, err := agent.Exec(ctx, api.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after close: %v", err)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Layers: []string{"x"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("task sandbox with layers: %v", err)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
	// Close closes every live sandbox.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if len(e.Sandboxes(nil)) != 0 {
		t.Fatal("sandboxes left after Close")
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
}

func hasEntry(ents []api.FileEntry, name string) bool {
	for _, e := range ents {
		if e.Name == name {
			return true
		}
	}
	return false
}

// TestEngineRawLayers: a sandbox from cache layers named by ref.
func TestEngineRawLayers(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	in := generated(t).Instances[0]
	if _, err := e.Build(ctx, BuildRun{InstanceIDs: []string{in.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	ref := envcache.RepoRef(in.Repo, in.BaseCommit)
	sb, err := e.CreateSandbox(ctx, SandboxRequest{Layers: []string{ref}, HostBase: true, Workdir: "/testbed"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "git rev-parse HEAD"})
	if err != nil || strings.TrimSpace(res.Stdout) != in.BaseCommit {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{Layers: []string{"repo/none@0"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown layer: %v", err)
	}
}

// TestEngineAdmission: sandboxes reserve their memory limit; one that does
// not fit waits until another closes, and one larger than the budget is
// refused at once.
func TestEngineAdmission(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.MemoryBudget = 600 << 20 })
	ctx := context.Background()
	first, err := e.CreateSandbox(ctx, SandboxRequest{Limits: api.Limits{MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := e.CreateSandbox(short, SandboxRequest{Limits: api.Limits{MemoryBytes: 512 << 20}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second sandbox admitted: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := e.CreateSandbox(ctx, SandboxRequest{Limits: api.Limits{MemoryBytes: 512 << 20}})
		if err == nil {
			err = s.Close()
		}
		done <- err
	}()
	first.Close()
	if err := <-done; err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{Limits: api.Limits{MemoryBytes: 1 << 30}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("larger than the budget: %v", err)
	}
	if n := e.Concurrency(api.Limits{MemoryBytes: 256 << 20}); n != 2 {
		t.Fatalf("concurrency %d", n)
	}
}

// TestEngineRunEvaluation: a batch through the harness's files, several
// models, resumption keyed by patch and spec, errors retried on resume.
func TestEngineRunEvaluation(t *testing.T) {
	g := generated(t)
	out := harness.New(t.TempDir())
	ctx := context.Background()
	insts := g.Instances
	ids := []string{insts[0].InstanceID, insts[1].InstanceID, insts[2].InstanceID, insts[3].InstanceID}
	gold0, gold1 := insts[0].Patch, insts[1].Patch
	broken := "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
	empty := ""
	preds := []api.Prediction{
		{InstanceID: ids[0], Model: "org/a", ModelPatch: &gold0},
		{InstanceID: ids[1], Model: "org/a", ModelPatch: &broken},
		{InstanceID: ids[2], Model: "b", ModelPatch: &empty},
		{InstanceID: ids[3], Model: "b", ModelPatch: &gold1}, // the wrong instance's fix
	}
	run := func(e *Engine, preds []api.Prediction, keepErrors bool) api.RunReport {
		t.Helper()
		rep, err := e.RunEvaluation(ctx, EvalRun{RunID: "r1", InstanceIDs: ids, Predictions: preds, Workers: 2, KeepErrors: keepErrors, SkippedRows: 1}, out)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	outcomes := func(rep api.RunReport) map[string]string {
		m := map[string]string{}
		for _, r := range rep.Results {
			m[r.InstanceID] = string(r.Outcome) + map[bool]string{true: "*"}[r.Resumed]
		}
		return m
	}
	e := openEngine(t, "", nil)
	rep := run(e, preds, false)
	want := map[string]string{ids[0]: "resolved", ids[1]: "patch_apply_failed", ids[2]: "empty_patch", ids[3]: "unresolved"}
	if got := outcomes(rep); !sameMap(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if len(rep.Summaries) != 2 || rep.Summaries[0].Model != "b" || rep.Summaries[1].Model != "org/a" {
		t.Fatalf("summaries %+v", rep.Summaries)
	}
	a := rep.Summaries[1]
	if a.SubmittedInstances != 2 || a.ResolvedInstances != 1 || a.ErrorInstances != 1 || a.TotalInstances != 4 || a.SkippedRows != 1 || len(a.IncompleteIDs) != 2 {
		t.Fatalf("summary of org/a: %+v", a)
	}
	// The harness's files: a summary per model, report.json only for verdicts.
	for _, m := range []string{"org/a", "b"} {
		if p, _ := out.SummaryPath("r1", m); !exists(p) {
			t.Errorf("no summary %s", p)
		}
	}
	dir := func(m, id string) string { d, _ := out.InstanceDir("r1", m, id); return d }
	if !exists(filepath.Join(dir("org/a", ids[0]), harness.ReportFile)) || exists(filepath.Join(dir("org/a", ids[1]), harness.ReportFile)) ||
		!exists(filepath.Join(dir("org/a", ids[1]), harness.RunLogFile)) || exists(dir("b", ids[2])) {
		t.Fatal("files per outcome are not the harness's")
	}

	// Resume: verdicts and empty patches are kept; the error is retried.
	rep = run(e, preds, false)
	want = map[string]string{ids[0]: "resolved*", ids[1]: "patch_apply_failed", ids[2]: "empty_patch", ids[3]: "unresolved*"}
	if got := outcomes(rep); !sameMap(got, want) {
		t.Fatalf("resumed outcomes %v, want %v", got, want)
	}
	// Unless told to keep errors.
	if got := outcomes(run(e, preds, true)); got[ids[1]] != "patch_apply_failed*" {
		t.Fatalf("keep errors: %v", got)
	}
	// A changed patch is evaluated again, and its stale report.json goes.
	changed := append([]api.Prediction{}, preds...)
	changed[0].ModelPatch = &broken
	if got := outcomes(run(e, changed, false)); got[ids[0]] != "patch_apply_failed" {
		t.Fatalf("changed patch: %v", got)
	}
	if exists(filepath.Join(dir("org/a", ids[0]), harness.ReportFile)) {
		t.Fatal("stale report.json kept")
	}
	// A changed spec is evaluated again.
	e2 := openEngine(t, "      eval_commands: [\"true\"]\n", nil)
	if got := outcomes(run(e2, preds, false)); got[ids[3]] != "unresolved" {
		t.Fatalf("changed spec: %v", got)
	}
	// So is one evaluated with another network.
	e3 := openEngine(t, "      eval_commands: [\"true\"]\n", func(c *Config) { c.EvalNetwork = sandbox.NetworkHost })
	rep = run(e3, preds, false)
	if got := outcomes(rep); got[ids[3]] != "unresolved" {
		t.Fatalf("changed network: %v", got)
	}
	for _, r := range rep.Results {
		if r.Outcome != api.OutcomeEmptyPatch && r.Network != sandbox.NetworkHost {
			t.Fatalf("%s evaluated with network %q", r.InstanceID, r.Network)
		}
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestEngineBadRunInput: what a run cannot do is refused before any
// sandbox starts, naming every problem.
func TestEngineBadRunInput(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	id := generated(t).Instances[0].InstanceID
	p := ""
	for _, tc := range []struct {
		name string
		run  EvalRun
		want string
	}{
		{"unknown instance", EvalRun{RunID: "r", InstanceIDs: []string{"nope"}}, "nope"},
		{"prediction outside the run", EvalRun{RunID: "r", InstanceIDs: []string{id}, Predictions: []api.Prediction{{InstanceID: "other", Model: "m", ModelPatch: &p}}}, "other"},
		{"run id that leaves --out", EvalRun{RunID: "..", InstanceIDs: []string{id}}, "run id"},
		{"model that leaves --out", EvalRun{RunID: "r", InstanceIDs: []string{id}, Predictions: []api.Prediction{{InstanceID: id, Model: "..", ModelPatch: &p}}}, "model_name_or_path"},
		{"repeat past the bound", EvalRun{RunID: "r", InstanceIDs: []string{id}, Repeat: MaxRepeat + 1}, "repeat"},
	} {
		_, err := e.RunEvaluation(ctx, tc.run, Discard)
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := e.RunValidation(ctx, ValidateRun{RunID: "r/x", InstanceIDs: []string{id}}, Discard); !errors.Is(err, ErrBadRequest) {
		t.Errorf("validation run id: %v", err)
	}
	// An instance without a usable spec (unknown log parser) is refused when added.
	g := generated(t)
	bad := g.Instances[0]
	bad.InstanceID, bad.Repo = "other__repo-1", "other/repo"
	if err := e.Add(bad); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "other__repo-1") {
		t.Errorf("no spec: %v", err)
	}
	ov := e.cfg.Overrides
	defer func() { e.cfg.Overrides = ov }()
	e.cfg.Overrides.Instances = map[string]spec.Patch{id: {LogParser: ptr("nosuchparser")}}
	if err := e.Add(g.Instances[0]); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "nosuchparser") {
		t.Errorf("unknown log parser: %v", err)
	}
	// An evaluation network other than none and host opens no engine.
	if _, err := Open(ctx, Config{StateDir: t.TempDir(), Cache: CacheConfig{Dir: t.TempDir()}, EvalNetwork: "bridge"}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "bridge") {
		t.Errorf("evaluation network: %v", err)
	}
	// So does a canary mode other than separate, inline and off; one
	// evaluation given such a mode is refused.
	if _, err := Open(ctx, Config{StateDir: t.TempDir(), Cache: CacheConfig{Dir: t.TempDir()}, Canary: "beside"}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "beside") {
		t.Errorf("canary mode: %v", err)
	}
	if _, _, err := e.EvaluateCanary(ctx, g.Instances[0].InstanceID, "gold", ptr(g.Instances[0].Patch), "beside"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("evaluation's canary mode: %v", err)
	}
}

func ptr(s string) *string { return &s }

// TestEngineLoadDataset: bad rows stop the load unless skipped, and are
// counted; unknown --instances ids are refused.
func TestEngineLoadDataset(t *testing.T) {
	e := openEngine(t, "", nil)
	g := generated(t)
	b, err := os.ReadFile(g.DatasetPath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(p, append(b, []byte("{not json\n")...), 0o644)
	if _, err := e.LoadDataset(p, dataset.Filter{}, false); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "row 5") {
		t.Fatalf("bad row: %v", err)
	}
	d, err := e.LoadDataset(p, dataset.Filter{}, true)
	if err != nil || len(d.RowErrors) != 1 || len(d.Selected) != 4 {
		t.Fatalf("skipping: %v %+v", err, d)
	}
	if _, err := e.LoadDataset(g.DatasetPath, dataset.Filter{IDs: []string{"nope"}}, false); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestEngineRunValidation: gold must resolve and empty must not.
func TestEngineRunValidation(t *testing.T) {
	e := openEngine(t, "", nil)
	g := generated(t)
	// An instance whose FAIL_TO_PASS test already passes at the base commit.
	easy := g.Instances[1]
	easy.InstanceID, easy.FailToPass = "demo__calc-easy", easy.PassToPass[:1]
	if err := e.Add(easy); err != nil {
		t.Fatal(err)
	}
	out := harness.New(t.TempDir())
	rep, err := e.RunValidation(context.Background(), ValidateRun{RunID: "v", InstanceIDs: []string{g.Instances[1].InstanceID, easy.InstanceID}, Workers: 2}, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Valid) != 1 || rep.Valid[0] != g.Instances[1].InstanceID || !strings.Contains(rep.Invalid[easy.InstanceID], "empty patch resolves") || len(rep.Errored) != 0 {
		t.Fatalf("validation %+v", rep)
	}
	if v, err := e.Validate(context.Background(), easy.InstanceID); err != nil || v.Valid {
		t.Fatalf("single validation: %v %+v", err, v)
	}
}

// TestEngineValidationNetwork: an instance whose tests need the network
// (they connect to a server on the host) is invalid without it, and the
// validation says its gold patch resolves with the host's network; with
// the host's network for evaluations it is valid and nothing is rechecked.
func TestEngineValidationNetwork(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	g := generated(t)
	inst := g.Instances[1]
	inst.InstanceID = "demo__calc-net"
	extra := fmt.Sprintf("instances:\n  %s:\n    test_cmd: \"python -c 'import socket; socket.create_connection((\\\"127.0.0.1\\\", %d), 5)' && python -m unittest -v\"\n",
		inst.InstanceID, ln.Addr().(*net.TCPAddr).Port)
	validate := func(network string) (api.ValidationReport, *harness.Dir, *Engine) {
		t.Helper()
		e := openEngine(t, extra, func(c *Config) { c.EvalNetwork = network })
		if err := e.Add(inst); err != nil {
			t.Fatal(err)
		}
		out := harness.New(t.TempDir())
		rep, err := e.RunValidation(context.Background(), ValidateRun{RunID: "v", InstanceIDs: []string{inst.InstanceID, g.Instances[0].InstanceID}, Workers: 2}, out)
		if err != nil {
			t.Fatal(err)
		}
		return rep, out, e
	}

	rep, out, e := validate("")
	if len(rep.Valid) != 1 || rep.Valid[0] != g.Instances[0].InstanceID || len(rep.NetworkRechecked) != 1 || rep.NetworkRechecked[0] != inst.InstanceID {
		t.Fatalf("validation without network: %+v", rep)
	}
	v := rep.Validations[1]
	if v.InstanceID != inst.InstanceID || v.Valid || v.Errored || !v.NeedsNetwork || !strings.Contains(rep.Invalid[inst.InstanceID], "fails only without network") ||
		v.Gold.Network != sandbox.NetworkNone || v.Gold.Outcome != api.OutcomeUnresolved {
		t.Fatalf("validation of %s: %+v", inst.InstanceID, v)
	}
	if rep.Validations[0].NeedsNetwork {
		t.Fatalf("a valid instance marked as needing network: %+v", rep.Validations[0])
	}
	// The evaluation with network is a run of its own, in the harness's files.
	recheck := "v" + NetworkRecheckSuffix
	res, ok, err := out.Lookup(context.Background(), recheck, "gold", inst.InstanceID)
	if err != nil || !ok || res.Outcome != api.OutcomeResolved || res.Network != sandbox.NetworkHost {
		t.Fatalf("stored recheck: %v %v %+v", err, ok, res)
	}
	if p, _ := out.SummaryPath(recheck, "gold"); !exists(p) {
		t.Fatalf("no summary %s", p)
	}
	// One instance alone is judged the same way.
	if v, err := e.Validate(context.Background(), inst.InstanceID); err != nil || v.Valid || !v.NeedsNetwork {
		t.Fatalf("single validation: %v %+v", err, v)
	}

	rep, _, _ = validate(sandbox.NetworkHost)
	if len(rep.Valid) != 2 || len(rep.NetworkRechecked) != 0 || rep.Validations[1].NeedsNetwork {
		t.Fatalf("validation with network: %+v", rep)
	}
}

// TestEngineBuildInterrupted: a build stopped before it starts reports
// every instance as interrupted, not failed, and says how to go on.
func TestEngineBuildInterrupted(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := e.Build(ctx, BuildRun{InstanceIDs: e.InstanceIDs(), Workers: 2})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "run the same command again") || rep.Interrupted != 4 || rep.Failed != 0 {
		t.Fatalf("%v %+v", err, rep)
	}
}

// TestEngineRunRepeat: a run's Repeat reaches every evaluation (the
// result says how many times its tests ran, report.json whether they
// flipped) and a stored result is reused only for the same Repeat.
func TestEngineRunRepeat(t *testing.T) {
	g := generated(t)
	out := harness.New(t.TempDir())
	e := openEngine(t, "", nil)
	inst := g.Instances[0]
	preds := []api.Prediction{{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &inst.Patch}}
	run := func(repeat int) api.EvalResult {
		t.Helper()
		rep, err := e.RunEvaluation(context.Background(), EvalRun{RunID: "r", InstanceIDs: []string{inst.InstanceID}, Predictions: preds, Workers: 1, Repeat: repeat}, out)
		if err != nil || len(rep.Results) != 1 {
			t.Fatalf("%v %+v", err, rep)
		}
		return rep.Results[0]
	}
	if r := run(2); r.Outcome != api.OutcomeResolved || r.Runs != 2 || r.Flaky || r.Resumed {
		t.Fatalf("repeat 2: %+v", r)
	}
	if r := run(2); !r.Resumed || r.Runs != 2 {
		t.Fatalf("repeat 2 again: not reused: %+v", r)
	}
	if r := run(1); r.Resumed || r.Runs != 0 {
		t.Fatalf("repeat 1 after 2: reused: %+v", r)
	}
}
