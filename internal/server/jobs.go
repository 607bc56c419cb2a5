package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
)

func datasetFilter(req api.LoadDatasetRequest) dataset.Filter {
	return dataset.Filter{IDs: req.Instances, Regex: req.Regex, Slice: req.Slice}
}

var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(namePat) })

// jobs are the batch runs of a server, by id.
type jobs struct {
	s  *Server
	wg sync.WaitGroup

	mu   sync.Mutex // guards byID and every job's info
	byID map[string]*job
	next int
}

type job struct {
	info   api.Job
	cancel context.CancelFunc
}

func newJobs(s *Server) *jobs { return &jobs{s: s, byID: map[string]*job{}} }

// wait returns once every job has ended (after Serve cancelled them).
func (j *jobs) wait() { j.wg.Wait() }

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.JobRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	if req.Kind == "" {
		req.Kind = api.JobEvaluation
	}
	if req.Workers == 0 {
		req.Workers = 2
	}
	if req.Workers < 0 || req.Workers > 1024 {
		return nil, badRequest("workers %d: from 1 to 1024", req.Workers)
	}
	if !runIDPattern().MatchString(req.RunID) {
		return nil, badRequest("run_id %q: use letters, digits and _.@+- (at most 128, not starting with a symbol)", req.RunID)
	}
	ids := []string(req.InstanceIDs)
	preds := []api.Prediction(req.Predictions)
	if err := checkPredictions(preds); err != nil {
		return nil, err
	}
	switch req.Kind {
	case api.JobEvaluation:
		if req.Gold == (len(preds) > 0) {
			return nil, badRequest("an evaluation needs predictions or gold (one of the two)")
		}
		if len(ids) == 0 {
			for _, p := range preds {
				ids = append(ids, p.InstanceID)
			}
		}
		if req.Gold {
			for _, id := range ids {
				in, err := s.e.Instance(id)
				if err != nil {
					return nil, err
				}
				fix := in.ReferenceFix()
				preds = append(preds, api.Prediction{InstanceID: id, Model: "gold", ModelPatch: &fix})
			}
		}
	case api.JobValidation:
		if len(preds) > 0 || req.Gold {
			return nil, badRequest("a validation grades each instance's gold and empty patch: give no predictions")
		}
	default:
		return nil, badRequest("kind %q: evaluation or validation", req.Kind)
	}
	if len(ids) == 0 {
		return nil, badRequest("no instances: give instance_ids or predictions")
	}
	for _, id := range ids {
		if _, err := s.e.Instance(id); err != nil {
			return nil, err
		}
	}
	// Held from here to the job's end: a second job of the run id over
	// one of these instances (from this daemon or an msb eval) is refused
	// now, not failed later.
	locked := ids
	if req.Kind == api.JobEvaluation {
		locked = nil
		for _, p := range preds {
			locked = append(locked, p.InstanceID)
		}
	}
	out := harness.New(s.o.OutDir)
	unlock, err := out.LockRun(req.RunID, locked)
	if err != nil {
		return nil, err
	}
	return s.jobs.start(req, ids, preds, out, unlock), nil
}

// heldRun is a run's harness directory whose lock the job holds already
// (the engine would try to take it again otherwise).
type heldRun struct{ engine.Sink }

// start runs a job in the background under the server's base context;
// unlock releases the run when it ends.
func (j *jobs) start(req api.JobRequest, ids []string, preds []api.Prediction, out *harness.Dir, unlock func()) api.Job {
	s := j.s
	ctx, cancel := context.WithCancel(s.base)
	j.mu.Lock()
	j.next++
	jb := &job{cancel: cancel, info: api.Job{ID: fmt.Sprintf("job-%d-%s", j.next, newRequestID()[:6]), Kind: req.Kind, RunID: req.RunID,
		State: api.JobRunning, Total: len(preds), CreatedAt: now(), OutDir: filepath.Join(out.Root(), req.RunID), Results: []api.EvalResult{}}}
	if req.Kind == api.JobValidation {
		jb.info.Total = 2 * len(ids)
	}
	j.byID[jb.info.ID] = jb
	info := jb.info
	j.mu.Unlock()
	progress := func(done, total int, res api.EvalResult) {
		j.mu.Lock()
		jb.info.Done, jb.info.Total = done, total
		jb.info.Results = append(jb.info.Results, res)
		j.mu.Unlock()
	}
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer cancel()
		s.log.Info("job started", "job", info.ID, "kind", req.Kind, "run_id", req.RunID, "total", info.Total)
		var err error
		var rep *api.RunReport
		var val *api.ValidationReport
		if req.Kind == api.JobValidation {
			var v api.ValidationReport
			v, err = s.e.RunValidation(ctx, engine.ValidateRun{RunID: req.RunID, InstanceIDs: ids, Workers: req.Workers, KeepErrors: req.KeepErrors, Progress: progress, Repeat: req.Repeat}, heldRun{out})
			if vp, ip, werr := out.WriteValidation(v); werr == nil {
				v.Files = map[string]string{"valid": vp, "invalid": ip}
			} else {
				err = errors.Join(err, werr)
			}
			val = &v
		} else {
			var r api.RunReport
			r, err = s.e.RunEvaluation(ctx, engine.EvalRun{RunID: req.RunID, InstanceIDs: ids, Predictions: preds, Workers: req.Workers,
				KeepErrors: req.KeepErrors, Progress: progress, Repeat: req.Repeat}, heldRun{out})
			r.Files = map[string]string{}
			for _, sum := range r.Summaries {
				if p, perr := out.SummaryPath(sum.RunID, sum.Model); perr == nil {
					r.Files["summary:"+sum.Model] = p
				}
			}
			rep = &r
		}
		unlock() // before the job says it ended: the run id is free then
		j.mu.Lock()
		defer j.mu.Unlock()
		jb.info.Report, jb.info.Validation, jb.info.FinishedAt = rep, val, now()
		switch {
		case ctx.Err() != nil:
			jb.info.State = api.JobCancelled
		case err != nil:
			jb.info.State = api.JobFailed
		default:
			jb.info.State = api.JobDone
		}
		if err != nil {
			jb.info.Error = err.Error()
		}
		s.log.Info("job ended", "job", jb.info.ID, "state", jb.info.State, "done", jb.info.Done, "err", err)
	}()
	return info
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (j *jobs) get(id string) (api.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	jb, ok := j.byID[id]
	if !ok {
		return api.Job{}, errorf(http.StatusNotFound, api.CodeNotFound, "no job %q", id)
	}
	info := jb.info
	info.Results = append([]api.EvalResult(nil), jb.info.Results...)
	return info, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	s.jobs.mu.Lock()
	ids := make([]string, 0, len(s.jobs.byID))
	for id := range s.jobs.byID {
		ids = append(ids, id)
	}
	s.jobs.mu.Unlock()
	sort.Strings(ids)
	out := api.JobList{Jobs: []api.Job{}}
	for _, id := range ids {
		if jb, err := s.jobs.get(id); err == nil {
			out.Jobs = append(out.Jobs, jb)
		}
	}
	sort.Slice(out.Jobs, func(a, b int) bool { return out.Jobs[a].CreatedAt < out.Jobs[b].CreatedAt })
	return out, nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.jobs.get(r.PathValue("job_id"))
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("job_id")
	s.jobs.mu.Lock()
	jb, ok := s.jobs.byID[id]
	s.jobs.mu.Unlock()
	if !ok {
		return nil, errorf(http.StatusNotFound, api.CodeNotFound, "no job %q", id)
	}
	jb.cancel()
	return s.jobs.get(id)
}
