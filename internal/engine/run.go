package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/task"
)

// Sink is where a run's results go, as they finish. Its methods may be
// called from many goroutines at once.
type Sink interface {
	// Lookup returns the result stored for model and instance by an
	// earlier run, if any.
	Lookup(ctx context.Context, runID, model, instanceID string) (api.EvalResult, bool, error)
	// Put stores one finished evaluation (an empty patch that was not run
	// too: art.Ran is false, and the harness keeps no files for it).
	Put(ctx context.Context, runID string, res api.EvalResult, art api.EvalArtifacts) error
	// Summary stores the run summary of one model, once every instance
	// of the run has finished or the run was interrupted.
	Summary(ctx context.Context, s api.RunSummary) error
}

// Discard is a Sink that keeps nothing (and so resumes nothing).
var Discard Sink = discard{}

type discard struct{}

func (discard) Lookup(context.Context, string, string, string) (api.EvalResult, bool, error) {
	return api.EvalResult{}, false, nil
}
func (discard) Put(context.Context, string, api.EvalResult, api.EvalArtifacts) error { return nil }
func (discard) Summary(context.Context, api.RunSummary) error                        { return nil }

// Progress reports one finished evaluation of a run: done of total, and
// the result (Resumed when read back from the Sink). It is called from the
// run's workers, one call at a time.
type Progress func(done, total int, res api.EvalResult)

// EvalRun is a batch evaluation.
type EvalRun struct {
	// RunID names the run (a path component: see api.CheckName).
	RunID string
	// InstanceIDs are the run's instances (known to the engine), in order:
	// the summaries' total_instances.
	InstanceIDs []string
	// Predictions are evaluated; each must be for one of InstanceIDs, at
	// most one per instance.
	Predictions []api.Prediction
	// Workers bounds the evaluations at once (also bounded by admission).
	Workers int
	// KeepErrors: on resume, reuse stored results that ended without a
	// verdict instead of evaluating them again.
	KeepErrors bool
	// SkippedRows is counted in the summaries (rows of the input left out).
	SkippedRows int
	Progress    Progress
}

// job is one evaluation of a run.
type job struct {
	t          *task.Task
	pred       api.Prediction
	gradeEmpty bool
}

// RunEvaluation evaluates every prediction, each in a fresh sandbox, with
// up to Workers at once, and hands each result to sink; a result sink
// already holds for the same patch and spec is reused (and, unless
// KeepErrors, only when it is a verdict or an empty patch). At the end
// sink gets one summary per model. An interrupted run (ctx ended) stores
// what finished, summarizes it and returns the context's error; what was
// cut short is not stored, so a rerun with the same run id resumes.
func (e *Engine) RunEvaluation(ctx context.Context, r EvalRun, sink Sink) (api.RunReport, error) {
	jobs, err := e.evalJobs(r)
	if err != nil {
		return api.RunReport{}, err
	}
	results, resumed, runErr := e.runJobs(ctx, r.RunID, jobs, r.Workers, r.KeepErrors, sink, r.Progress)
	rep := api.RunReport{RunID: r.RunID, Results: []api.EvalResult{}, Summaries: []api.RunSummary{}, Resumed: resumed}
	byModel := map[string]map[string]grading.Finished{}
	submitted := map[string][]string{}
	for _, p := range r.Predictions {
		submitted[p.Model] = append(submitted[p.Model], p.InstanceID)
		if byModel[p.Model] == nil {
			byModel[p.Model] = map[string]grading.Finished{}
		}
	}
	for _, res := range results {
		if res != nil {
			rep.Results = append(rep.Results, *res)
			byModel[res.Model][res.InstanceID] = grading.Finished{Outcome: res.Outcome, Detail: res.Detail}
		}
	}
	sort.Slice(rep.Results, func(i, j int) bool { return rep.Results[i].InstanceID < rep.Results[j].InstanceID })
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		s := grading.Summarize(m, r.RunID, r.InstanceIDs, submitted[m], byModel[m])
		s.SkippedRows = r.SkippedRows
		rep.Summaries = append(rep.Summaries, s)
		// The summary is written even when interrupted: it says what is
		// missing. A failed write is returned with the run's own error.
		if err := sink.Summary(context.WithoutCancel(ctx), s); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("storing the summary of %s: %w", m, err))
		}
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, runErr
}

// evalJobs checks a run and makes its jobs.
func (e *Engine) evalJobs(r EvalRun) ([]job, error) {
	if err := api.CheckName("run id", r.RunID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	inRun := map[string]bool{}
	var problems []string
	for _, id := range r.InstanceIDs {
		if _, err := e.task(id); err != nil {
			problems = append(problems, err.Error())
		}
		inRun[id] = true
	}
	seen := map[string]bool{}
	var jobs []job
	for _, p := range r.Predictions {
		switch {
		case !inRun[p.InstanceID]:
			problems = append(problems, fmt.Sprintf("prediction for %s, which is not an instance of the run", p.InstanceID))
		case seen[p.InstanceID]:
			problems = append(problems, fmt.Sprintf("%s predicted twice", p.InstanceID))
		case api.CheckName("model_name_or_path", dataset.ModelDir(p.Model)) != nil:
			problems = append(problems, api.CheckName("model_name_or_path", dataset.ModelDir(p.Model)).Error())
		default:
			t, _ := e.task(p.InstanceID)
			jobs = append(jobs, job{t: t, pred: p})
		}
		seen[p.InstanceID] = true
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w:\n  %s", ErrBadRequest, strings.Join(problems, "\n  "))
	}
	return jobs, nil
}

// runJobs runs jobs on up to workers goroutines, each admitted by memory.
// results[i] is nil for a job that did not finish (interrupted).
func (e *Engine) runJobs(ctx context.Context, runID string, jobs []job, workers int, keepErrors bool, sink Sink, progress Progress) ([]*api.EvalResult, int, error) {
	results := make([]*api.EvalResult, len(jobs))
	var mu sync.Mutex // guards done, resumed, errs and progress calls
	var done, resumed int
	var errs []error
	finish := func(i int, res api.EvalResult) {
		mu.Lock()
		defer mu.Unlock()
		results[i] = &res
		done++
		if res.Resumed {
			resumed++
		}
		if progress != nil {
			progress(done, len(jobs), res)
		}
	}
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	g := new(errgroup.Group) // not WithContext: one job's failure does not stop the others
	g.SetLimit(max(workers, 1))
	for i, j := range jobs {
		if ctx.Err() != nil {
			break // interrupted: the rest are left for the next run
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			if old, ok, err := sink.Lookup(ctx, runID, j.pred.Model, j.t.ID()); err != nil {
				fail(fmt.Errorf("reading the stored result of %s: %w", j.t.ID(), err))
			} else if ok && reusable(old, j, keepErrors) {
				old.Resumed = true
				finish(i, old)
				return nil
			}
			ev, err := e.evaluate(ctx, j.t, j.pred, j.gradeEmpty)
			if err != nil || ctx.Err() != nil && !ev.Result.Outcome.IsVerdict() {
				return nil // interrupted: not a real outcome, evaluate it next time
			}
			if err := sink.Put(context.WithoutCancel(ctx), runID, ev.Result, ev.Artifacts); err != nil {
				fail(fmt.Errorf("storing the result of %s: %w", j.t.ID(), err))
			}
			finish(i, ev.Result)
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("interrupted after %d of %d evaluations (rerun with the same run id to resume): %w", done, len(jobs), err))
	}
	return results, resumed, errors.Join(errs...)
}

// reusable says whether a stored result stands for job: same patch, same
// spec, and a final outcome.
func reusable(old api.EvalResult, j job, keepErrors bool) bool {
	if old.PatchDigest != task.PatchDigest(j.pred.ModelPatch) || old.SpecDigest != j.t.SpecDigest || old.InstanceID != j.t.ID() {
		return false
	}
	return keepErrors || old.Outcome.IsVerdict() || old.Outcome == api.OutcomeEmptyPatch
}

// ValidateRun is a batch validation.
type ValidateRun struct {
	RunID       string
	InstanceIDs []string
	Workers     int
	KeepErrors  bool
	SkippedRows int
	Progress    Progress
}

// RunValidation evaluates, for every instance, its reference fix (model
// "gold") and an empty patch graded like any other (model "empty"), each in
// a fresh sandbox, and judges them (task.Judge). Results and summaries go
// to sink as in RunEvaluation.
func (e *Engine) RunValidation(ctx context.Context, r ValidateRun, sink Sink) (api.ValidationReport, error) {
	rep := api.ValidationReport{RunID: r.RunID, Validations: []api.Validation{}, Valid: []string{}, Invalid: map[string]string{},
		Errored: []string{}, SkippedRows: r.SkippedRows}
	if err := api.CheckName("run id", r.RunID); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	var jobs []job
	var problems []string
	for _, id := range r.InstanceIDs {
		t, err := e.task(id)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		fix, none := t.Instance.ReferenceFix(), ""
		jobs = append(jobs, job{t: t, pred: api.Prediction{InstanceID: id, Model: "gold", ModelPatch: &fix}},
			job{t: t, pred: api.Prediction{InstanceID: id, Model: "empty", ModelPatch: &none}, gradeEmpty: true})
	}
	if len(problems) > 0 {
		return rep, fmt.Errorf("%w:\n  %s", ErrBadRequest, strings.Join(problems, "\n  "))
	}
	results, _, runErr := e.runJobs(ctx, r.RunID, jobs, r.Workers, r.KeepErrors, sink, r.Progress)
	for k, model := range []string{"gold", "empty"} {
		finished := map[string]grading.Finished{}
		for i := k; i < len(jobs); i += 2 {
			if res := results[i]; res != nil {
				finished[res.InstanceID] = grading.Finished{Outcome: res.Outcome, Detail: res.Detail}
			}
		}
		s := grading.Summarize(model, r.RunID, r.InstanceIDs, r.InstanceIDs, finished)
		s.SkippedRows = r.SkippedRows
		if err := sink.Summary(context.WithoutCancel(ctx), s); err != nil {
			runErr = errors.Join(runErr, err)
		}
	}
	for i := 0; i < len(jobs); i += 2 {
		gold, empty := results[i], results[i+1]
		if gold == nil || empty == nil {
			continue // interrupted
		}
		v := task.Judge(*gold, *empty)
		rep.Validations = append(rep.Validations, v)
		switch {
		case v.Valid:
			rep.Valid = append(rep.Valid, v.InstanceID)
		case v.Errored:
			rep.Errored = append(rep.Errored, v.InstanceID)
			rep.Invalid[v.InstanceID] = v.Reason
		default:
			rep.Invalid[v.InstanceID] = v.Reason
		}
	}
	sort.Strings(rep.Valid)
	sort.Strings(rep.Errored)
	sort.Slice(rep.Validations, func(i, j int) bool { return rep.Validations[i].InstanceID < rep.Validations[j].InstanceID })
	rep.Interrupted = ctx.Err() != nil
	return rep, runErr
}
