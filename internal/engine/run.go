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
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
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

// RunLocker is a Sink that can hold instances of a run for one writer:
// RunEvaluation and RunValidation hold theirs while they write them, and
// fail with the error LockRun gives when another holds one.
type RunLocker interface {
	LockRun(runID string, instanceIDs []string) (unlock func(), err error)
}

// lockRun holds the instances of the run in sink if it can hold them.
func lockRun(sink Sink, runID string, ids []string) (unlock func(), err error) {
	if l, ok := sink.(RunLocker); ok {
		return l.LockRun(runID, ids)
	}
	return func() {}, nil
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
	// BuildEvents, when set, receives the build steps of the layers an
	// evaluation had to build first (as Build's Events).
	BuildEvents func(BuildEvent)
	// Repeat runs each evaluation's tests this many times (0 or 1: once)
	// and marks the results whose runs disagree flaky (task.EvalOptions).
	Repeat int
}

// job is one evaluation of a run.
type job struct {
	t          *task.Task
	pred       api.Prediction
	gradeEmpty bool
	// net is the evaluation sandbox's network ("": the engine's).
	net string
	// limits are the evaluation sandbox's (nil: the grading defaults); an
	// evaluation of a sandbox takes that sandbox's.
	limits *sandbox.Limits
	// events receives the build steps of its layers (nil: none).
	events func(BuildEvent)
	// repeat: task.EvalOptions.Repeat.
	repeat int
	// canary: task.EvalOptions.Canary ("": the engine's).
	canary api.CanaryMode
}

// progress is the cache's Progress for the job's layers.
func (j job) progress() envcache.Progress {
	if j.events == nil {
		return nil
	}
	return func(ev envcache.Event) { j.events(buildEvent(ev)) }
}

// withEvents sets the build events of every job.
func withEvents(jobs []job, events func(BuildEvent)) {
	for i := range jobs {
		jobs[i].events = events
	}
}

func (j job) network(e *Engine) string {
	if j.net != "" {
		return j.net
	}
	return e.cfg.evalNetwork()
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
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.t.ID())
	}
	unlock, err := lockRun(sink, r.RunID, ids)
	if err != nil {
		return api.RunReport{}, err
	}
	defer unlock()
	withEvents(jobs, r.BuildEvents)
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

// MaxRepeat bounds how many times one evaluation's tests may run.
const MaxRepeat = 10

// checkRepeat refuses a repeat count outside 0..MaxRepeat.
func checkRepeat(n int) error {
	if n < 0 || n > MaxRepeat {
		return fmt.Errorf("%w: repeat %d: from 1 to %d", ErrBadRequest, n, MaxRepeat)
	}
	return nil
}

// evalJobs checks a run and makes its jobs.
func (e *Engine) evalJobs(r EvalRun) ([]job, error) {
	if err := api.CheckName("run id", r.RunID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := checkRepeat(r.Repeat); err != nil {
		return nil, err
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
			jobs = append(jobs, job{t: t, pred: p, repeat: r.Repeat})
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
			} else if ok && reusable(old, j, j.network(e), keepErrors) {
				old.Resumed = true
				finish(i, old)
				return nil
			}
			ev, err := e.evaluate(ctx, j)
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
// spec, same network, and a final outcome.
func reusable(old api.EvalResult, j job, network string, keepErrors bool) bool {
	if old.PatchDigest != task.PatchDigest(j.pred.ModelPatch) || old.SpecDigest != j.t.SpecDigest || old.InstanceID != j.t.ID() ||
		old.Network != network || max(old.Runs, 1) != max(j.repeat, 1) {
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
	// BuildEvents: as EvalRun's.
	BuildEvents func(BuildEvent)
	// Repeat: as EvalRun's, for the gold and the empty evaluations.
	Repeat int
}

// NetworkRecheckSuffix ends the run id under which RunValidation stores
// its evaluations of gold patches with the host's network.
const NetworkRecheckSuffix = "-eval-network-host"

// OfflineRecheckSuffix ends the run id under which RunValidation stores
// its second evaluations without network of the gold patches that
// resolved on the network recheck: a flaky test passes there too, a
// network need fails again.
const OfflineRecheckSuffix = "-eval-offline-again"

// RunValidation evaluates, for every instance, its reference fix (model
// "gold") and an empty patch graded like any other (model "empty"), each in
// a fresh sandbox, and judges them (task.Judge). Results and summaries go
// to sink as in RunEvaluation. When evaluation sandboxes have no network,
// the gold patches that did not resolve are evaluated once more with the
// host's network, as run RunID+NetworkRecheckSuffix, and those that then
// resolve once more without it, as run RunID+OfflineRecheckSuffix: an
// instance whose gold patch resolves with the network and fails again
// without stays invalid, marked NeedsNetwork; one whose gold patch resolves
// on the second offline run is invalid as flaky (its first two offline runs
// disagree), not NeedsNetwork. Progress counts these evaluations too (its
// total grows when they start).
func (e *Engine) RunValidation(ctx context.Context, r ValidateRun, sink Sink) (api.ValidationReport, error) {
	rep := api.ValidationReport{RunID: r.RunID, Validations: []api.Validation{}, Valid: []string{}, Invalid: map[string]string{},
		Errored: []string{}, NetworkRechecked: []string{}, OfflineRechecked: []string{}, SkippedRows: r.SkippedRows}
	if err := api.CheckName("run id", r.RunID); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := checkRepeat(r.Repeat); err != nil {
		return rep, err
	}
	var jobs []job
	var problems []string
	for _, id := range r.InstanceIDs {
		t, err := e.task(id)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		gold, empty := e.validationJobs(t)
		gold.repeat, empty.repeat = r.Repeat, r.Repeat
		jobs = append(jobs, gold, empty)
	}
	if len(problems) > 0 {
		return rep, fmt.Errorf("%w:\n  %s", ErrBadRequest, strings.Join(problems, "\n  "))
	}
	unlock, err := lockRun(sink, r.RunID, r.InstanceIDs)
	if err != nil {
		return rep, err
	}
	defer unlock()
	withEvents(jobs, r.BuildEvents)
	results, _, runErr := e.runJobs(ctx, r.RunID, jobs, r.Workers, r.KeepErrors, sink, r.Progress)
	for k, model := range []string{"gold", "empty"} {
		var ms []*api.EvalResult
		for i := k; i < len(jobs); i += 2 {
			ms = append(ms, results[i])
		}
		runErr = errors.Join(runErr, summarize(ctx, sink, model, r.RunID, r.InstanceIDs, ms, r.SkippedRows))
	}
	var vals []api.Validation
	var again []job
	for i := 0; i < len(jobs); i += 2 {
		gold, empty := results[i], results[i+1]
		if gold == nil || empty == nil {
			continue // interrupted
		}
		v := task.Judge(*gold, *empty)
		if j, ok := e.networkRecheck(v, jobs[i]); ok {
			again = append(again, j)
		}
		vals = append(vals, v)
	}
	if len(again) > 0 && ctx.Err() == nil {
		for _, j := range again {
			rep.NetworkRechecked = append(rep.NetworkRechecked, j.t.ID())
		}
		offline, err := e.recheck(ctx, r, again, len(jobs), vals, sink)
		rep.OfflineRechecked = append(rep.OfflineRechecked, offline...)
		runErr = errors.Join(runErr, err)
	}
	for _, v := range vals {
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
	sort.Strings(rep.NetworkRechecked)
	sort.Strings(rep.OfflineRechecked)
	sort.Slice(rep.Validations, func(i, j int) bool { return rep.Validations[i].InstanceID < rep.Validations[j].InstanceID })
	rep.Interrupted = ctx.Err() != nil
	return rep, runErr
}

// validationJobs are the evaluations that validate t: its reference fix,
// and an empty patch graded like any other.
func (e *Engine) validationJobs(t *task.Task) (gold, empty job) {
	fix, none := t.Instance.ReferenceFix(), ""
	return job{t: t, pred: api.Prediction{InstanceID: t.ID(), Model: "gold", ModelPatch: &fix}},
		job{t: t, pred: api.Prediction{InstanceID: t.ID(), Model: "empty", ModelPatch: &none}, gradeEmpty: true}
}

// networkRecheck is the gold evaluation to run again with the host's
// network, when v's gold patch did not resolve (a verdict) without it.
func (e *Engine) networkRecheck(v api.Validation, gold job) (job, bool) {
	if gold.network(e) == sandbox.NetworkHost || v.Gold.Outcome != api.OutcomeUnresolved {
		return job{}, false
	}
	gold.net = sandbox.NetworkHost
	return gold, true
}

// settleRecheck judges v, whose gold patch did not resolve without
// network, from its evaluation with the host's network (withNet) and, when
// that resolved, its second evaluation without network (offline; nil: none
// finished). Only a gold patch that resolves with the network and fails
// again without is marked NeedsNetwork; one that resolves on the second
// offline run is flaky, its FlakyTests the tests whose status changed
// between the two offline runs. v stays invalid either way.
func settleRecheck(v *api.Validation, withNet api.EvalResult, offline *api.EvalResult) {
	if withNet.Outcome != api.OutcomeResolved {
		return
	}
	switch {
	case offline == nil || !offline.Outcome.IsVerdict():
		v.Reason += " (resolved with the host's network, but a second run without network ended without a verdict: " +
			"whether it needs the network or is flaky is not known)"
	case offline.Outcome == api.OutcomeResolved:
		v.Flaky, v.FlakyTests = true, changedTests(v.Gold, *offline)
		v.Reason = "flaky: the gold patch did not resolve without network, then resolved on a second run without network " +
			"(and with the host's network): not a network need"
		if len(v.FlakyTests) > 0 {
			v.Reason += "; tests whose status changed between the two runs without network: " + strings.Join(v.FlakyTests, ", ")
		}
	default:
		v.NeedsNetwork = true
		v.Reason += " (resolved with the host's network and failed again on a second run without: it fails only without network)"
	}
}

// changedTests are the tests (sorted) whose status differs between a and
// b: passed in one and failed or missing in the other (grading.Flips).
func changedTests(a, b api.EvalResult) []string {
	return grading.Flips([]grading.StatusMap{gradedStatuses(a), gradedStatuses(b)})
}

// gradedStatuses are the statuses of r's graded tests: passed or failed.
func gradedStatuses(r api.EvalResult) grading.StatusMap {
	m := grading.StatusMap{}
	ts := r.Report.TestsStatus
	if ts == nil {
		return m
	}
	for _, o := range []api.Outcomes{ts.FailToPass, ts.PassToPass, ts.FailToFail, ts.PassToFail} {
		for _, n := range o.Success {
			m[n] = grading.Passed
		}
		for _, n := range o.Failure {
			m[n] = grading.Failed
		}
	}
	return m
}

// recheck runs the network rechecks of a validation (after done
// evaluations) as run r.RunID+NetworkRecheckSuffix and summarizes them;
// the gold patches that then resolve are evaluated once more without
// network, as run r.RunID+OfflineRecheckSuffix (those instances are
// returned), and vals are judged from both (settleRecheck).
func (e *Engine) recheck(ctx context.Context, r ValidateRun, again []job, done int, vals []api.Validation, sink Sink) ([]string, error) {
	withNet, err := e.rerun(ctx, r, r.RunID+NetworkRecheckSuffix, "with the host's network", again, done, sink)
	var offline []job
	for _, j := range again {
		if res, ok := withNet[j.t.ID()]; ok && res.Outcome == api.OutcomeResolved && ctx.Err() == nil {
			j.net = sandbox.NetworkNone
			offline = append(offline, j)
		}
	}
	var ids []string
	var second map[string]api.EvalResult
	if len(offline) > 0 {
		var err2 error
		second, err2 = e.rerun(ctx, r, r.RunID+OfflineRecheckSuffix, "once more without network", offline, done+len(again), sink)
		err = errors.Join(err, err2)
		for _, j := range offline {
			ids = append(ids, j.t.ID())
		}
	}
	for i := range vals {
		if res, ok := withNet[vals[i].InstanceID]; ok {
			var off *api.EvalResult
			if o, ok := second[vals[i].InstanceID]; ok {
				off = &o
			}
			settleRecheck(&vals[i], res, off)
		}
	}
	return ids, err
}

// rerun evaluates the gold jobs again (after done evaluations) as run
// runID, summarizes them, and returns the finished results by instance.
func (e *Engine) rerun(ctx context.Context, r ValidateRun, runID, how string, jobs []job, done int, sink Sink) (map[string]api.EvalResult, error) {
	progress := r.Progress
	if progress != nil {
		progress = func(d, total int, res api.EvalResult) { r.Progress(done+d, done+total, res) }
	}
	e.log.Info("evaluating gold patches again "+how, "run", runID, "instances", len(jobs))
	results, _, err := e.runJobs(ctx, runID, jobs, r.Workers, r.KeepErrors, sink, progress)
	ids := make([]string, len(jobs))
	byID := map[string]api.EvalResult{}
	for i, j := range jobs {
		ids[i] = j.t.ID()
		if results[i] != nil {
			byID[ids[i]] = *results[i]
		}
	}
	err = errors.Join(err, summarize(ctx, sink, "gold", runID, ids, results, r.SkippedRows))
	return byID, err
}

// summarize hands sink the summary of one model's results (nil: not
// finished) over instances, even when ctx has ended.
func summarize(ctx context.Context, sink Sink, model, runID string, instances []string, results []*api.EvalResult, skipped int) error {
	finished := map[string]grading.Finished{}
	for _, res := range results {
		if res != nil {
			finished[res.InstanceID] = grading.Finished{Outcome: res.Outcome, Detail: res.Detail}
		}
	}
	s := grading.Summarize(model, runID, instances, instances, finished)
	s.SkippedRows = skipped
	if err := sink.Summary(context.WithoutCancel(ctx), s); err != nil {
		return fmt.Errorf("storing the summary of %s: %w", model, err)
	}
	return nil
}
