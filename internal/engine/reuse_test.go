package engine

import (
	"errors"
	"reflect"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/task"
)

// TestEngineReuse: a stored result stands for an evaluation only with the
// same patch, spec, instance, network and repeat, and a final outcome (any outcome
// with keep_errors); a validation needs both its gold and empty results.
func TestEngineReuse(t *testing.T) {
	e := openEngine(t, "", nil)
	id := generated(t).Instances[0].InstanceID
	tk, err := e.task(id)
	if err != nil {
		t.Fatal(err)
	}
	fix, none, other := tk.Instance.ReferenceFix(), "", "diff --git a/x b/x\n"
	stored := func(model string, patch *string, edit func(*api.EvalResult)) api.EvalResult {
		r := api.EvalResult{InstanceID: id, Model: model, Outcome: api.OutcomeResolved, PatchDigest: task.PatchDigest(patch),
			SpecDigest: tk.SpecDigest, Network: sandbox.NetworkNone}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	gold := stored("gold", &fix, nil)
	mine := api.Prediction{InstanceID: id, Model: "mine", ModelPatch: &other}
	for _, c := range []struct {
		name  string
		req   api.ReuseRequest
		stale []string
	}{
		{"gold", api.ReuseRequest{InstanceID: id, Results: api.List[api.EvalResult]{gold}}, nil},
		{"gold, no result", api.ReuseRequest{InstanceID: id}, []string{"gold"}},
		{"gold, host network", api.ReuseRequest{InstanceID: id, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.Network = sandbox.NetworkHost })}}, []string{"gold"}},
		{"gold, other instance", api.ReuseRequest{InstanceID: id, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.InstanceID = "other__repo-1" })}}, []string{"gold"}},
		{"gold, other spec", api.ReuseRequest{InstanceID: id, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.SpecDigest = "sha256:0" })}}, []string{"gold"}},
		{"prediction", api.ReuseRequest{InstanceID: id, Prediction: &mine, Results: api.List[api.EvalResult]{stored("mine", &other, nil)}}, nil},
		{"prediction, other patch", api.ReuseRequest{InstanceID: id, Prediction: &mine, Results: api.List[api.EvalResult]{stored("mine", &fix, nil)}}, []string{"mine"}},
		{"infra error", api.ReuseRequest{InstanceID: id, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.Outcome = api.OutcomeInfraError })}}, []string{"gold"}},
		{"infra error kept", api.ReuseRequest{InstanceID: id, KeepErrors: true, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.Outcome = api.OutcomeInfraError })}}, nil},
		{"validation", api.ReuseRequest{Kind: api.JobValidation, InstanceID: id, Results: api.List[api.EvalResult]{gold,
			stored("empty", &none, func(r *api.EvalResult) { r.Outcome = api.OutcomeUnresolved })}}, nil},
		{"repeated", api.ReuseRequest{InstanceID: id, Repeat: 3, Results: api.List[api.EvalResult]{
			stored("gold", &fix, func(r *api.EvalResult) { r.Runs = 3 })}}, nil},
		{"repeated, run once", api.ReuseRequest{InstanceID: id, Repeat: 3, Results: api.List[api.EvalResult]{gold}}, []string{"gold"}},
		{"validation, no empty", api.ReuseRequest{Kind: api.JobValidation, InstanceID: id, Results: api.List[api.EvalResult]{gold}}, []string{"empty"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.Reuse(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reusable != (len(c.stale) == 0) || !reflect.DeepEqual([]string(got.Stale), append([]string{}, c.stale...)) {
				t.Errorf("got %+v, want stale %v", got, c.stale)
			}
		})
	}
	for _, c := range []struct {
		name string
		req  api.ReuseRequest
		want error
	}{
		{"unknown instance", api.ReuseRequest{InstanceID: "nobody__none-1"}, ErrNotFound},
		{"repeat out of range", api.ReuseRequest{InstanceID: id, Repeat: -1}, ErrBadRequest},
		{"unknown kind", api.ReuseRequest{Kind: "grade", InstanceID: id}, ErrBadRequest},
		{"prediction of another instance", api.ReuseRequest{InstanceID: id, Prediction: &api.Prediction{InstanceID: "x", Model: "m"}}, ErrBadRequest},
	} {
		if _, err := e.Reuse(c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

// TestEngineReuseDirs: the answer names where a run keeps each model's
// results of the instance, the model spelt as the harness's directory
// (org/model -> org__model), so a driver need not spell it.
func TestEngineReuseDirs(t *testing.T) {
	e := openEngine(t, "", nil)
	id := generated(t).Instances[0].InstanceID
	patch := "diff --git a/x b/x\n"
	for _, c := range []struct {
		req  api.ReuseRequest
		want map[string]string
	}{
		{api.ReuseRequest{InstanceID: id, Prediction: &api.Prediction{InstanceID: id, Model: "org/mine", ModelPatch: &patch}},
			map[string]string{"org/mine": "org__mine/" + id}},
		{api.ReuseRequest{InstanceID: id, Kind: api.JobValidation}, map[string]string{"gold": "gold/" + id, "empty": "empty/" + id}},
	} {
		got, err := e.Reuse(c.req)
		if err != nil || !reflect.DeepEqual(got.Dirs, c.want) {
			t.Errorf("%+v: dirs %v (%v), want %v", c.req, got.Dirs, err, c.want)
		}
	}
}
