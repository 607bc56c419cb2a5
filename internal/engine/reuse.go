package engine

import (
	"fmt"
	"path"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
)

// Reuse says whether the results req gives (stored by an earlier run)
// stand for a run's evaluations of req.InstanceID now, by the rule
// RunEvaluation and RunValidation resume by (reusable).
func (e *Engine) Reuse(req api.ReuseRequest) (api.Reuse, error) {
	if err := checkRepeat(req.Repeat); err != nil {
		return api.Reuse{}, err
	}
	jobs, err := e.reuseJobs(req)
	if err != nil {
		return api.Reuse{}, err
	}
	stored := map[string]api.EvalResult{}
	for _, r := range req.Results {
		stored[r.Model] = r
	}
	ans := api.Reuse{Stale: api.List[string]{}, Dirs: map[string]string{}}
	for _, j := range jobs {
		ans.Dirs[j.pred.Model] = path.Join(dataset.ModelDir(j.pred.Model), req.InstanceID)
		j.repeat = req.Repeat
		old, ok := stored[j.pred.Model]
		if !ok || !reusable(old, j, j.network(e), req.KeepErrors) {
			ans.Stale = append(ans.Stale, j.pred.Model)
		}
	}
	ans.Reusable = len(ans.Stale) == 0
	return ans, nil
}

// reuseJobs are the evaluations a run of req's kind makes of its instance.
func (e *Engine) reuseJobs(req api.ReuseRequest) ([]job, error) {
	t, err := e.task(req.InstanceID)
	if err != nil {
		return nil, err
	}
	switch req.Kind {
	case "", api.JobEvaluation:
		if req.Prediction == nil {
			fix := t.Instance.ReferenceFix()
			return []job{{t: t, pred: api.Prediction{InstanceID: t.ID(), Model: "gold", ModelPatch: &fix}}}, nil
		}
		if req.Prediction.InstanceID != t.ID() {
			return nil, fmt.Errorf("%w: prediction for %s, not %s", ErrBadRequest, req.Prediction.InstanceID, t.ID())
		}
		return []job{{t: t, pred: *req.Prediction}}, nil
	case api.JobValidation:
		if req.Prediction != nil {
			return nil, fmt.Errorf("%w: a validation grades the gold and empty patches: give no prediction", ErrBadRequest)
		}
		gold, empty := e.validationJobs(t)
		return []job{gold, empty}, nil
	}
	return nil, fmt.Errorf("%w: kind %q: evaluation or validation", ErrBadRequest, req.Kind)
}
