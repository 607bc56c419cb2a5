package multiswe

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
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
	g, err := grading.For(in)
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
	if _, err := grading.For(other); !errors.Is(err, ErrUnknownRepo) {
		t.Errorf("unknown repository: %v", err)
	}
	bare := in
	m := *in.MultiSWE
	m.Run = nil
	bare.MultiSWE = &m
	if _, err := grading.For(bare); !errors.Is(err, ErrNoRecordedRuns) {
		t.Errorf("row without recorded runs: %v", err)
	}
	g, err := grading.For(dataset.Instance{InstanceID: "x", Source: dataset.SWEBench})
	if err != nil || g != grading.SWEBench {
		t.Errorf("SWE-bench row: %v, %v", g, err)
	}
}
