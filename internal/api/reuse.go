package api

// ReuseRequest is POST /v1/results/reusable: do results an earlier run
// stored stand for a run's evaluations of one instance now? A run keeps
// such results instead of evaluating again (msb eval, msb validate and
// jobs resume by the same rule); a driver that stores results elsewhere
// (msb.ray) asks the daemon instead of deciding it itself.
type ReuseRequest struct {
	Kind       string `json:"kind,omitempty"` // evaluation (default) or validation
	InstanceID string `json:"instance_id"`
	// Prediction is the evaluation's patch; without it, the instance's
	// reference fix (model "gold"), as JobRequest.Gold. None for a
	// validation: its evaluations are the gold and the empty patch.
	Prediction *Prediction `json:"prediction,omitempty"`
	KeepErrors bool        `json:"keep_errors,omitempty"`
	// Repeat: the run's, as JobRequest's (a result stands only for as
	// many runs of the tests as it had).
	Repeat int `json:"repeat,omitempty"`
	// Results are the stored results (result.json), one per model at most.
	Results List[EvalResult] `json:"results"`
}

// Reuse answers a ReuseRequest.
type Reuse struct {
	// Reusable: every evaluation of the run has a stored result that stands.
	Reusable bool `json:"reusable"`
	// Stale are the models whose evaluation has no stored result, or one
	// that does not stand (another patch, spec, instance, network or
	// repeat, or no verdict without KeepErrors).
	Stale List[string] `json:"stale"`
	// Dirs maps each model the run evaluates to the directory a run keeps
	// its results of the instance in (result.json, the logs), relative to
	// the run's output directory (<out>/<run id>): <model>/<instance id>,
	// the model's name spelt as a directory name. A driver reading stored
	// results asks here (with no Results) rather than spelling it itself.
	Dirs map[string]string `json:"dirs"`
}
