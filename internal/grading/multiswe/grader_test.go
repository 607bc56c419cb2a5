package multiswe

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// cargoLog prints a run's statuses as cargo test does.
func cargoLog(r *dataset.RunResult) string {
	var b strings.Builder
	for _, s := range []struct {
		names []string
		word  string
	}{{r.Passed, "ok"}, {r.Failed, "FAILED"}, {r.Skipped, "ignored"}} {
		for _, n := range s.names {
			fmt.Fprintf(&b, "test %s ... %s\n", n, s.word)
		}
	}
	return b.String()
}

// rowOf returns the first shared row of repo with f2p tests.
func rowOf(t *testing.T, repo string) dataset.Instance {
	t.Helper()
	for _, in := range loadRows(t) {
		if in.Repo == repo && len(in.MultiSWE.F2P) > 0 {
			return in
		}
	}
	t.Fatalf("no row of %s with f2p tests", repo)
	return dataset.Instance{}
}

// TestGraderJudge: grading.For picks this package's grader for a
// Multi-SWE-bench row; a fix run printing the row's recorded fix statuses
// resolves it, the test-patch run's statuses do not, and infrastructure
// failures keep their outcome.
func TestGraderJudge(t *testing.T) {
	in := rowOf(t, "tokio-rs/bytes")
	g, err := grading.For(in, "")
	if err != nil {
		t.Fatal(err)
	}
	if g.Name() != "multi-swe-bench" {
		t.Fatalf("grading.For picked %q", g.Name())
	}
	patch := in.Patch
	judge := func(log string, mod func(*grading.Evaluation)) grading.Verdict {
		e := grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &patch, Log: log, TestPatch: in.TestPatch}
		if mod != nil {
			mod(&e)
		}
		return g.Judge(e)
	}
	v := judge(cargoLog(in.MultiSWE.FixPatch), nil)
	if v.Outcome != api.OutcomeResolved || v.Resolution != api.ResolvedFull || !v.Report.Resolved || v.Reward(api.RewardBinary) != 1 {
		t.Fatalf("gold fix run: %+v", v)
	}
	if ts := v.Report.TestsStatus; len(ts.FailToPass.Success) != len(in.FailToPass) || len(ts.PassToPass.Failure) != 0 {
		t.Errorf("gold fix run tests status %+v", ts)
	}
	v = judge(cargoLog(in.MultiSWE.TestPatch), nil)
	if v.Outcome != api.OutcomeUnresolved || v.Report.Resolved || v.Detail == "" {
		t.Errorf("test-patch run as fix run: %+v", v)
	}
	v = judge("test a ... ok\ntest a ... FAILED\n", nil)
	if v.Outcome != api.OutcomeUnresolved || !strings.Contains(v.Detail, ErrConflict.Error()) {
		t.Errorf("conflicting log: %+v", v)
	}
	v = judge(cargoLog(in.MultiSWE.FixPatch), func(e *grading.Evaluation) { e.ApplyErr = errors.New("hunk 2 failed") })
	if v.Outcome != api.OutcomePatchApplyFailed {
		t.Errorf("patch that did not apply: %+v", v)
	}
	v = judge(cargoLog(in.MultiSWE.FixPatch), func(e *grading.Evaluation) { e.Patch = nil })
	if v.Outcome != api.OutcomeEmptyPatch {
		t.Errorf("no patch: %+v", v)
	}
}

// TestGraderFor: a row whose repository has no parser, or without the
// recorded runs the rules compare with, is refused with a clear error;
// a SWE-bench row keeps SWE-bench's grader.
func TestGraderFor(t *testing.T) {
	in := rowOf(t, "tokio-rs/bytes")
	other := in
	other.Repo = "someone/else"
	if _, err := grading.For(other, ""); !errors.Is(err, ErrUnknownRepo) {
		t.Errorf("unknown repository: %v", err)
	}
	bare := in
	m := *in.MultiSWE
	m.Run = nil
	bare.MultiSWE = &m
	if _, err := grading.For(bare, ""); !errors.Is(err, ErrNoRecordedRuns) {
		t.Errorf("row without recorded runs: %v", err)
	}
	g, err := grading.For(dataset.Instance{InstanceID: "x", Source: dataset.SWEBench}, grading.ParserPytest)
	if err != nil || g != grading.SWEBench {
		t.Errorf("SWE-bench row: %v, %v", g, err)
	}
}

// TestGraderSpecFramework: the framework a spec names decides the parser,
// so a repository the table does not know is gradeable and a known one
// is read with the named framework, not its own; a spec naming a parser
// that is not a framework, or an unknown framework, is refused.
func TestGraderSpecFramework(t *testing.T) {
	in := rowOf(t, "tokio-rs/bytes")
	patch := in.Patch
	judge := func(in dataset.Instance, parser, log string) grading.Verdict {
		t.Helper()
		g, err := grading.For(in, parser)
		if err != nil {
			t.Fatalf("grading.For(%s, %q): %v", in.Repo, parser, err)
		}
		return g.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &patch, Log: log, TestPatch: in.TestPatch})
	}
	other := in
	other.Repo = "someone/else"
	if v := judge(other, ParserName(FrameworkCargo), cargoLog(in.MultiSWE.FixPatch)); v.Outcome != api.OutcomeResolved {
		t.Errorf("unknown repository, cargo named: %+v", v)
	}
	if v := judge(in, ParserName(FrameworkGoTest), cargoLog(in.MultiSWE.FixPatch)); v.Outcome != api.OutcomeUnresolved {
		t.Errorf("cargo log read as go test's: %+v", v)
	}
	if _, err := grading.For(in, grading.ParserPytest); !errors.Is(err, ErrNotFramework) {
		t.Errorf("pytest named: %v", err)
	}
	if _, err := grading.For(in, ParserPrefix+"nope"); !errors.Is(err, ErrUnknownFramework) {
		t.Errorf("unknown framework named: %v", err)
	}
}

// TestParsersRegistered: every framework is a grading parser under
// ParserName, reading a log as Parse does; a log Parse refuses names no
// test.
func TestParsersRegistered(t *testing.T) {
	for _, fw := range FrameworkNames() {
		if _, err := grading.Lookup(ParserName(fw)); err != nil {
			t.Errorf("%s: %v", fw, err)
		}
	}
	p, err := grading.Lookup(ParserName(FrameworkCargo))
	if err != nil {
		t.Fatal(err)
	}
	got := p("test a ... ok\ntest b ... FAILED\ntest c ... ignored\n")
	want := grading.StatusMap{"a": grading.Passed, "b": grading.Failed, "c": grading.Skipped}
	if !maps.Equal(got, want) {
		t.Errorf("cargo log read as %v, want %v", got, want)
	}
	if got := p("test a ... ok\ntest a ... FAILED\n"); len(got) != 0 {
		t.Errorf("conflicting log read as %v, want no test", got)
	}
}

// TestGraderHarnessLog: the integrity canary's run, appended to the log
// between its markers, is not read as the instance's tests, even where it
// names one of them.
func TestGraderHarnessLog(t *testing.T) {
	in := rowOf(t, "tokio-rs/bytes")
	g, err := grading.For(in, ParserName(FrameworkCargo))
	if err != nil {
		t.Fatal(err)
	}
	c := integrity.Canary{Token: "c4n4ry"}
	f2p := sortedKeys(in.MultiSWE.F2P)[0]
	log := cargoLog(in.MultiSWE.FixPatch) + c.Start() + "\ntest " + f2p + " ... FAILED\ntest msb_canary ... ok\n" + c.End() + "\n"
	patch := in.Patch
	v := g.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &patch, Log: log, TestPatch: in.TestPatch, Canary: c})
	if v.Outcome != api.OutcomeResolved {
		t.Errorf("gold fix run with a canary run: %+v", v)
	}
	if _, ok := v.Statuses["msb_canary"]; ok {
		t.Errorf("the canary's test among the statuses: %v", v.Statuses)
	}
}
