package api

// Outcome is what happened to one evaluation. Only OutcomeResolved and
// OutcomeUnresolved are verdicts on the patch; the others say the patch
// could not be judged (or, for an empty patch, was not).
type Outcome string

// The outcomes of an evaluation.
const (
	OutcomeResolved         Outcome = "resolved"
	OutcomeUnresolved       Outcome = "unresolved"
	OutcomePatchApplyFailed Outcome = "patch_apply_failed"
	OutcomeEmptyPatch       Outcome = "empty_patch"
	OutcomeTestTimeout      Outcome = "test_timeout"
	OutcomeEnvBuildFailed   Outcome = "env_build_failed"
	OutcomeInfraError       Outcome = "infra_error"
)

// AllOutcomes lists every outcome, verdicts first.
var AllOutcomes = []Outcome{
	OutcomeResolved, OutcomeUnresolved, OutcomePatchApplyFailed, OutcomeEmptyPatch,
	OutcomeTestTimeout, OutcomeEnvBuildFailed, OutcomeInfraError,
}

// IsVerdict reports whether the outcome judges the patch.
func (o Outcome) IsVerdict() bool { return o == OutcomeResolved || o == OutcomeUnresolved }

// IsError reports whether the harness counts the outcome as an error: a
// submitted, non-empty patch that got no report.json.
func (o Outcome) IsError() bool { return !o.IsVerdict() && o != OutcomeEmptyPatch }

// IsInfra reports whether the outcome is the infrastructure's failure, not
// the patch's (the harness's "likely infrastructure failures").
func (o Outcome) IsInfra() bool { return o == OutcomeEnvBuildFailed || o == OutcomeInfraError }

// Resolution is the harness's ResolvedStatus.
type Resolution string

// The harness's resolution values.
const (
	ResolvedFull    Resolution = "RESOLVED_FULL"
	ResolvedPartial Resolution = "RESOLVED_PARTIAL"
	ResolvedNo      Resolution = "RESOLVED_NO"
)

// RewardMode chooses how a graded evaluation becomes a number.
type RewardMode string

const (
	// RewardBinary: 1 when resolved (FULL), else 0.
	RewardBinary RewardMode = "binary"
	// RewardFraction: the share of FAIL_TO_PASS and PASS_TO_PASS tests that
	// succeeded, counted together; 1 when resolved. A dense signal for
	// training, not a SWE-bench metric.
	RewardFraction RewardMode = "fraction"
)

// Outcomes lists which tests of one list succeeded and which failed.
type Outcomes struct {
	Success List[string] `json:"success"`
	Failure List[string] `json:"failure"`
}

// TestsStatus is the harness's tests_status object.
type TestsStatus struct {
	FailToPass Outcomes `json:"FAIL_TO_PASS"`
	PassToPass Outcomes `json:"PASS_TO_PASS"`
	FailToFail Outcomes `json:"FAIL_TO_FAIL"`
	PassToFail Outcomes `json:"PASS_TO_FAIL"`
}

// InstanceReport is one instance's entry in the harness's report.json.
type InstanceReport struct {
	PatchIsNone              bool         `json:"patch_is_None"`
	PatchExists              bool         `json:"patch_exists"`
	PatchSuccessfullyApplied bool         `json:"patch_successfully_applied"`
	Resolved                 bool         `json:"resolved"`
	TestsStatus              *TestsStatus `json:"tests_status,omitempty"`
	// Integrity is the tamper checks' verdict on the model patch (not the
	// harness's: empty when there was no patch to check); IntegrityReasons
	// say what a tampered patch changed, one line per file.
	Integrity        Integrity    `json:"integrity,omitempty"`
	IntegrityReasons List[string] `json:"integrity_reasons,omitempty"`
	// IntegrityNotes say which checks did not run, and why (a test
	// command that cannot take the canary).
	IntegrityNotes List[string] `json:"integrity_notes,omitempty"`
	// Flaky: the evaluation was repeated (--repeat) and a test's status,
	// or the outcome, was not the same every time; FlakyTests are the
	// tests whose status flipped. The verdict and reward are the first
	// run's, and trainers should mask a flaky reward.
	Flaky      bool         `json:"flaky,omitempty"`
	FlakyTests List[string] `json:"flaky_tests,omitempty"`
}

// ReportFile is the content of a per-instance report.json:
// {"<instance_id>": {...}}.
type ReportFile map[string]InstanceReport

// Prediction is one row of a predictions file, as the harness reads it.
// ModelPatch is nil for a JSON null (the harness's patch_is_None).
type Prediction struct {
	InstanceID string  `json:"instance_id"`
	Model      string  `json:"model_name_or_path"`
	ModelPatch *string `json:"model_patch"`
}

// Timings of an evaluation's phases.
type Timings struct {
	// Env: the layers looked up (or built) and leased.
	Env int64 `json:"env_ns"`
	// TaskReady: the sandbox created, and for SWE-smith the bug committed.
	TaskReady int64 `json:"task_ready_ns"`
	Patch     int64 `json:"patch_ns"`
	Tests     int64 `json:"tests_ns"`
	Grading   int64 `json:"grading_ns"`
	Total     int64 `json:"total_ns"`
	// Canary: the integrity canary's sandbox, opened to closed (in
	// parallel with Tests under CanarySeparate when admitted, after it
	// otherwise).
	Canary int64 `json:"canary_ns,omitempty"`
	// CPU: the CPU time of the evaluation's sandboxes' processes, the
	// canary's included, where a cgroup accounts it (0: unknown);
	// CanaryCPU the canary's sandbox's share of it.
	CPU       int64 `json:"cpu_ns,omitempty"`
	CanaryCPU int64 `json:"canary_cpu_ns,omitempty"`
}

// EvalResult is one evaluation of one patch on one instance.
type EvalResult struct {
	InstanceID string  `json:"instance_id"`
	Model      string  `json:"model_name_or_path"`
	Outcome    Outcome `json:"outcome"`
	// Detail says why, for every outcome but resolved and unresolved, in
	// full (it may span lines), and for an unresolved patch that
	// --integrity fail voided, the integrity reasons.
	Detail     string     `json:"detail,omitempty"`
	Resolution Resolution `json:"resolution,omitempty"`
	Reward     float64    `json:"reward"`
	// Flaky marks a reward a repeated evaluation could not pin down
	// (Report.Flaky): mask it rather than train on it.
	Flaky bool `json:"flaky,omitempty"`
	// Runs is how many times the tests ran (--repeat; omitted for 1).
	Runs int `json:"runs,omitempty"`
	// ApplyMethod is the command that applied the model patch.
	ApplyMethod string `json:"apply_method,omitempty"`
	// TestExitCode is the test command's exit status, when it ran.
	TestExitCode *int           `json:"test_exit_code,omitempty"`
	Report       InstanceReport `json:"report"`
	// PatchDigest and SpecDigest key a stored result: a rerun evaluates
	// again when the patch, or the spec and test fields of the instance,
	// changed.
	PatchDigest string `json:"patch_digest"`
	SpecDigest  string `json:"spec_digest"`
	// Network is the evaluation sandbox's: "none" (no route out) or
	// "host". A stored result is reused only for the same network.
	Network string  `json:"network"`
	Timings Timings `json:"timings"`
	// Resumed: read back from an earlier run instead of evaluated.
	Resumed bool `json:"resumed,omitempty"`
}

// EvalArtifacts are the files an evaluation leaves, as the harness names
// them. Empty means not produced (the harness writes no such file).
type EvalArtifacts struct {
	Patch      string `json:"patch"`       // patch.diff
	EvalScript string `json:"eval_script"` // eval.sh
	TestOutput string `json:"test_output"` // test_output.txt
	RunLog     string `json:"run_log"`     // run_instance.log
	// Ran: the evaluation started (an empty patch that is not graded
	// does not: the harness leaves no directory for it).
	Ran bool `json:"ran"`
	// PatchWritten, ScriptWritten, TestsRan: which of the harness's files
	// exist for this outcome.
	PatchWritten  bool `json:"patch_written"`
	ScriptWritten bool `json:"script_written"`
	TestsRan      bool `json:"tests_ran"`
}

// RunSummary is the harness's run summary (make_run_report) for one
// model, plus outcomes (every outcome's ids) and skipped_rows.
type RunSummary struct {
	Model                 string                     `json:"model_name_or_path"`
	RunID                 string                     `json:"run_id"`
	TotalInstances        int                        `json:"total_instances"`
	SubmittedInstances    int                        `json:"submitted_instances"`
	CompletedInstances    int                        `json:"completed_instances"`
	ResolvedInstances     int                        `json:"resolved_instances"`
	UnresolvedInstances   int                        `json:"unresolved_instances"`
	InfraFailureInstances int                        `json:"infra_failure_instances"`
	EmptyPatchInstances   int                        `json:"empty_patch_instances"`
	ErrorInstances        int                        `json:"error_instances"`
	CompletedIDs          List[string]               `json:"completed_ids"`
	IncompleteIDs         List[string]               `json:"incomplete_ids"`
	EmptyPatchIDs         List[string]               `json:"empty_patch_ids"`
	SubmittedIDs          List[string]               `json:"submitted_ids"`
	ResolvedIDs           List[string]               `json:"resolved_ids"`
	UnresolvedIDs         List[string]               `json:"unresolved_ids"`
	InfraFailureIDs       List[string]               `json:"infra_failure_ids"`
	FailureReasons        Map[string, string]        `json:"failure_reasons"`
	ErrorIDs              List[string]               `json:"error_ids"`
	SchemaVersion         int                        `json:"schema_version"`
	Outcomes              Map[Outcome, List[string]] `json:"outcomes"`
	SkippedRows           int                        `json:"skipped_rows"`
}

// RunReport is what a batch evaluation returns: a summary per model (sorted
// by model name), every result (sorted by instance id) and where the files
// went.
type RunReport struct {
	RunID     string              `json:"run_id"`
	Summaries List[RunSummary]    `json:"summaries"`
	Results   List[EvalResult]    `json:"results"`
	Resumed   int                 `json:"resumed"`
	Files     Map[string, string] `json:"files"` // what -> path, e.g. "summary:gold"
	// Interrupted: the run stopped before every instance finished; rerun
	// with the same run id to resume.
	Interrupted bool `json:"interrupted"`
}

// Validation is whether one instance is admitted for RL: its gold patch
// resolves and an empty patch does not.
type Validation struct {
	InstanceID string `json:"instance_id"`
	Valid      bool   `json:"valid"`
	// Reason says why not, in full; empty when valid.
	Reason string `json:"reason,omitempty"`
	// Errored: the verdict could not be reached (an evaluation ended
	// without a verdict), as opposed to an instance found invalid.
	Errored bool `json:"errored"`
	// NeedsNetwork: the gold patch did not resolve without network and
	// resolved when evaluated again with the host's network (a test that
	// reaches a server). The instance stays invalid; Reason says so.
	NeedsNetwork bool `json:"needs_network"`
	// Flaky: the gold patch did not resolve without network, resolved
	// with the host's network, and resolved again on a second run without
	// network, so the first failure was a flake and not a network need;
	// FlakyTests are the tests whose status changed between the two runs
	// without network. The instance stays invalid (as a flaky --repeat
	// does); Reason says so.
	Flaky      bool         `json:"flaky,omitempty"`
	FlakyTests List[string] `json:"flaky_tests,omitempty"`
	Gold       EvalResult   `json:"gold"`
	Empty      EvalResult   `json:"empty"`
}

// ValidationReport is what a validation run returns.
type ValidationReport struct {
	RunID       string              `json:"run_id"`
	Validations List[Validation]    `json:"validations"`
	Valid       List[string]        `json:"valid"`   // valid.json
	Invalid     Map[string, string] `json:"invalid"` // invalid.json: id -> reason
	Errored     List[string]        `json:"errored"`
	// NetworkRechecked are the instances whose gold patch was evaluated
	// again with the host's network (it did not resolve without).
	NetworkRechecked List[string] `json:"network_rechecked"`
	// OfflineRechecked are the instances of NetworkRechecked whose gold
	// patch resolved with the network and was evaluated once more without
	// (Validation.NeedsNetwork when it failed again, Flaky when not).
	OfflineRechecked List[string]        `json:"offline_rechecked"`
	SkippedRows      int                 `json:"skipped_rows"`
	Files            Map[string, string] `json:"files"`
	Interrupted      bool                `json:"interrupted"`
}

// Integrity is the verdict of the grader's tamper checks on a model patch
// (internal/grading/integrity): ok, or tampered with the reasons.
type Integrity string

// The integrity verdicts.
const (
	IntegrityOK       Integrity = "ok"
	IntegrityTampered Integrity = "tampered"
)

// IntegrityMode says what a tampered verdict does to the result.
type IntegrityMode string

const (
	// IntegrityFail: a tampered patch is unresolved with reward 0 and the
	// reasons in the detail (the default for rewards: API evaluate, gym, Ray).
	IntegrityFail IntegrityMode = "fail"
	// IntegrityWarn: the harness's verdict stands and the flag is reported
	// beside it (the default of msb eval and msb validate).
	IntegrityWarn IntegrityMode = "warn"
)

// CanaryMode says where an evaluation runs its integrity canary, trading
// the canary's secrecy for time (docs/integrity.md, "Canary modes").
type CanaryMode string

const (
	// CanarySeparate: in a sandbox of its own, prepared as the
	// harness's, in parallel with the harness's run when admission has
	// room for both; a patch cannot tell the two runs apart by the
	// script, the files, the command line or the state they leave.
	CanarySeparate CanaryMode = "separate"
	// CanaryInline: in the harness's sandbox, after the harness's tests,
	// appended to its eval script: no second sandbox, but a patch can tell
	// the canary's run from the harness's and fake only the latter.
	CanaryInline CanaryMode = "inline"
	// CanaryForked (the default): the harness's eval script runs up to
	// its test command once; its sandbox is then forked into two fresh
	// sandboxes, one runs the harness's tests, the other the canary, so
	// the canary pays no eval step of its own and stays as secret as
	// separate's. Where the script has no safe split point (an eval step
	// that may change the shell's state), or the sandbox cannot be
	// forked, it runs as separate, and the report's integrity_notes says
	// so; the set-up's layer leaves the store as the evaluation ends.
	CanaryForked CanaryMode = "forked"
	// CanaryOff: no canary (the static rules and the structured channel
	// still run; the report's integrity_notes says the canary did not).
	CanaryOff CanaryMode = "off"
)

// Valid reports whether m is a canary mode ("" is the default,
// CanaryForked).
func (m CanaryMode) Valid() bool {
	return m == "" || m == CanarySeparate || m == CanaryForked || m == CanaryInline || m == CanaryOff
}
