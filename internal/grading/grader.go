package grading

import (
	"fmt"
	"sync"

	"github.com/minisandbox/msb/internal/dataset"
)

// Grader decides evaluations by one harness's rules: it reads an
// evaluation's test log into per-test statuses and grades them into a
// verdict. (What to run for an instance is not a grader's business.) A
// verdict from any grader has passed the integrity stage (Integrity).
type Grader interface {
	// Name names the harness whose rules the grader follows.
	Name() string
	// Judge grades one evaluation of the grader's instance.
	Judge(e Evaluation) Verdict
}

// GraderFactory makes the grader of one instance, or says why the
// instance cannot be graded (a repository without a known parser, a row
// without the data its harness's rules need). parser is the log parser
// the instance's spec names (spec.Spec.LogParser; "" when there is no
// spec): a harness whose parsers are registered under its own prefix
// (RegisterParser) reads the log with the one named, so that a repository
// of a known framework is gradeable without an entry of its own.
type GraderFactory func(in dataset.Instance, parser string) (Grader, error)

// SWEBench grades by the SWE-bench harness's rules (Judge): the grader of
// every source no other grader is registered for.
var SWEBench Grader = sweBench{}

type sweBench struct{}

func (sweBench) Name() string               { return "swe-bench" }
func (sweBench) Judge(e Evaluation) Verdict { return Judge(e) }

var (
	mu      sync.RWMutex // guards graders
	graders = map[dataset.Source]GraderFactory{}
)

// Register makes f the grader factory of a dataset source. A harness's
// package registers itself when imported (package multiswe for
// dataset.MultiSWEBench), as database/sql drivers do.
func Register(src dataset.Source, f GraderFactory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := graders[src]; dup {
		panic(fmt.Sprintf("grading: a grader is already registered for %q", src))
	}
	graders[src] = f
}

// For returns the grader of an instance whose spec names the log parser
// parser ("" for none): the one registered for its source, else SWEBench
// (which reads the log with the parser an Evaluation carries).
func For(in dataset.Instance, parser string) (Grader, error) {
	mu.RLock()
	f, ok := graders[in.Source]
	mu.RUnlock()
	if !ok {
		return SWEBench, nil
	}
	g, err := f(in, parser)
	if err != nil {
		return nil, fmt.Errorf("grader for %s (%s): %w", in.InstanceID, in.Source, err)
	}
	return g, nil
}

// Integrity is the stage every grader's verdict passes through: the
// integrity check of the evaluation's patch against its test patch (see
// checkIntegrity).
func Integrity(e Evaluation, v Verdict) Verdict { return checkIntegrity(e, v) }
