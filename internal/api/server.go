package api

import "encoding/json"

// The types below are the bodies of msb serve's native API (/v1); see
// docs/api.md for the routes and docs/openapi.json for the schema.

// ErrorCode is the stable, machine-readable class of an API error. Clients
// switch on it, never on the message.
type ErrorCode string

// Error codes of /v1, with their HTTP status (docs/api.md "Errors").
const (
	CodeBadRequest       ErrorCode = "bad_request"          // 400: malformed body, invalid field; the message names it
	CodePathEscape       ErrorCode = "path_escape"          // 400: a path leaves the sandbox root
	CodeInvalidConfig    ErrorCode = "invalid_config"       // 400: a sandbox configuration that cannot be built
	CodeUnauthorized     ErrorCode = "unauthorized"         // 401: missing or wrong token (TCP only)
	CodeNotFound         ErrorCode = "not_found"            // 404: sandbox, session, instance, file, job or layer
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"   // 405
	CodeConflict         ErrorCode = "conflict"             // 409: a session or file that already exists
	CodeSessionEnded     ErrorCode = "session_ended"        // 409: the session's shell exited; open a new one
	CodeNoInstance       ErrorCode = "no_instance"          // 409: diff/evaluate/gym on a sandbox made from raw layers
	CodeGone             ErrorCode = "sandbox_gone"         // 410: the sandbox was closed or reaped (the message says why)
	CodeBodyTooLarge     ErrorCode = "body_too_large"       // 413: the request body exceeds --max-body
	CodeQuotaExceeded    ErrorCode = "quota_exceeded"       // 429: no room now (live sandboxes, memory, disk); retry, or ask to wait
	CodeInternal         ErrorCode = "internal"             // 500
	CodeUnavailable      ErrorCode = "unavailable"          // 503: the daemon is shutting down, or lacks a program the request needs
	CodeTooLarge         ErrorCode = "insufficient_storage" // 507: the request can never fit (a limit above the whole budget)
)

// ErrorBody is the body of every error response of /v1.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo says what went wrong.
type ErrorInfo struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// RequestID is the X-Request-ID of the request (one is made when the
	// client sent none); the daemon's log lines carry it.
	RequestID string `json:"request_id,omitempty"`
}

// Health is GET /v1/health.
type Health struct {
	Status      string      `json:"status"` // ok, or shutting_down
	Version     string      `json:"version"`
	Mode        string      `json:"mode"` // root or rootless
	UptimeNs    int64       `json:"uptime_ns"`
	Sandboxes   int         `json:"sandboxes"` // live
	Enforcement Enforcement `json:"enforcement"`
	Quota       Quota       `json:"quota"`
}

// Quota is what the daemon admits at once, and what is taken now. A zero
// maximum means no bound.
type Quota struct {
	MaxSandboxes     int   `json:"max_sandboxes"`
	Sandboxes        int   `json:"sandboxes"`
	MemoryBytes      int64 `json:"memory_bytes"`
	MemoryUsedBytes  int64 `json:"memory_used_bytes"`
	DiskBytes        int64 `json:"disk_bytes"`
	DiskUsedBytes    int64 `json:"disk_used_bytes"`
	MaxBodyBytes     int64 `json:"max_body_bytes"`
	MaxAdmissionWait int64 `json:"max_admission_wait_ns"`
	// GradingReserve is how many evaluation sandboxes the budgets keep
	// room for that agents' sandboxes cannot take (a sandbox's evaluate
	// grades in a second sandbox while the agent's is open).
	GradingReserve int `json:"grading_reserve"`
}

// CreateSandboxRequest is POST /v1/sandboxes. Give InstanceID (an instance
// the daemon knows), or Instance (a dataset row, added first), for a task
// sandbox at the task's starting state in /testbed; or neither, for a raw
// sandbox from Layers (cache refs or digests, bottom first) or the host's
// system directories.
type CreateSandboxRequest struct {
	InstanceID string          `json:"instance_id,omitempty"`
	Instance   json.RawMessage `json:"instance,omitempty"`
	Layers     List[string]    `json:"layers,omitempty"`
	HostBase   bool            `json:"host_base,omitempty"`
	// Image runs a raw sandbox on an image the daemon's cache holds (a
	// reference, image/<ref>, sha256:<digest>), a Debian base msb built
	// (debian/<suite>/<key>, debian/<name>) or a named snapshot
	// (snapshot/<name>) instead of the host base, below Layers: its Env
	// before Env, its WorkingDir the default Workdir, its User (a
	// snapshot's: its sandbox's) running the commands, rootless too.
	// Unknown: not_found.
	Image string `json:"image,omitempty"`
	// Workdir and Env are for raw sandboxes (a task sandbox works in its
	// repository, /testbed or where its image keeps it, with its
	// instance's environment).
	Workdir string       `json:"workdir,omitempty"`
	Env     List[string] `json:"env,omitempty"`
	// Network is none (default: no route out), host, or filtered: a way
	// out through a forwarder msb runs, under AllowOut and DenyOut.
	Network string              `json:"network,omitempty"`
	Labels  Map[string, string] `json:"labels,omitempty"`
	Limits  Limits              `json:"limits,omitempty"`

	// AllowOut and DenyOut are a filtered sandbox's rules, E2B's: what an
	// AllowOut entry matches is reachable, else what a DenyOut entry
	// matches is not, else it is (so DenyOut ["0.0.0.0/0"] with AllowOut
	// reaches only AllowOut). An entry is an IPv4 address, CIDR or host
	// name (resolved at creation), with an optional ":port". The host's
	// 127.0.0.1 (10.0.2.2 in the sandbox) is reachable only on what an
	// AllowOut entry "127.0.0.1[:port]" or "localhost[:port]" names.
	// docs/sandbox.md "Network".
	AllowOut List[string] `json:"allow_out,omitempty"`
	DenyOut  List[string] `json:"deny_out,omitempty"`

	// LifetimeNs and IdleTimeoutNs bound the sandbox (0: the daemon's
	// defaults, --lifetime and --idle-timeout); past either the daemon
	// closes it and its state says reaped.
	LifetimeNs    int64 `json:"lifetime_ns,omitempty"`
	IdleTimeoutNs int64 `json:"idle_timeout_ns,omitempty"`
	// AdmissionWaitNs is how long to wait for room (live sandboxes,
	// memory, disk) before failing with quota_exceeded; 0 fails at once.
	// Capped by the daemon's --max-admission-wait.
	AdmissionWaitNs int64 `json:"admission_wait_ns,omitempty"`
	// MaxOutput caps each output stream of a command (0: 1 MiB).
	MaxOutput int `json:"max_output,omitempty"`
	// Count asks for that many sandboxes like this one (1 to 256), all
	// or none, answered as a SandboxList; 0 (absent) creates one,
	// answered as a SandboxInfo. Each is admitted as a create is.
	Count int `json:"count,omitempty"`
	// Session opens a session of that name with the create, its shell
	// started while the sandbox starts (a spare's shell started ahead is
	// renamed to it): one request instead of the create and then
	// POST /v1/sandboxes/{id}/sessions with the defaults.
	Session string `json:"session,omitempty"`
	// Warm asks the daemon to keep that many sandboxes of this instance or
	// image, with this shape, started ahead for the next creates (bounded
	// by its --spares; 0 keeps what an earlier create asked, else
	// --spares-per-instance). A create that matches takes one.
	Warm int `json:"warm,omitempty"`
}

// SandboxList is GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes List[SandboxInfo] `json:"sandboxes"`
}

// ExecEvent is one line of a streaming exec (NDJSON, or the data of one
// server-sent event): output as it comes, then exactly one result or error.
type ExecEvent struct {
	// Type is stdout, stderr, result or error.
	Type string `json:"type"`
	// Data is output (stdout, stderr events), valid UTF-8 as in ExecResult.
	Data   string      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *ErrorInfo  `json:"error,omitempty"`
}

// Exec event types.
const (
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventResult = "result"
	EventError  = "error"
)

// SessionList is GET /v1/sandboxes/{id}/sessions.
type SessionList struct {
	Sessions List[string] `json:"sessions"`
}

// SessionInfo answers a session's creation.
type SessionInfo struct {
	Name string `json:"name"`
}

// InterruptResult says whether a command was running in the session when
// the interrupt came; that command's exec returns with timed_out.
type InterruptResult struct {
	Interrupted bool `json:"interrupted"`
}

// FileList is GET /v1/sandboxes/{id}/files/list.
type FileList struct {
	Path    string          `json:"path"`
	Entries List[FileEntry] `json:"entries"`
}

// FileWritten answers a file or tar upload.
type FileWritten struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Diff is the agent's patch: every change in /testbed against the task's
// starting state, as the SWE-bench harness reads a model patch.
type Diff struct {
	Patch string `json:"patch"`
}

// EvaluateRequest grades a patch in a FRESH sandbox of the sandbox's
// instance (never in the sandbox itself). Patch nil (absent) grades the
// sandbox's own diff.
type EvaluateRequest struct {
	Patch *string `json:"patch,omitempty"`
	// Model names the patch's author in the result (default "none").
	Model string `json:"model_name_or_path,omitempty"`
	// Artifacts adds the evaluation's files (test output, eval.sh, the
	// run log, the patch) to the answer.
	Artifacts bool `json:"artifacts,omitempty"`
	// Repeat runs the tests this many times, each in a fresh sandbox, and
	// marks the result flaky when a test's status flips (0 or 1: once).
	Repeat int `json:"repeat,omitempty"`
}

// EvaluateResponse is an evaluation: the result holds the outcome, the
// reward and the harness's report (report, the per-instance entry of
// report.json).
type EvaluateResponse struct {
	Result    EvalResult     `json:"result"`
	Artifacts *EvalArtifacts `json:"artifacts,omitempty"`
}

// LoadDatasetRequest is POST /v1/datasets: a dataset file on the daemon's
// host, with the CLI's filters.
type LoadDatasetRequest struct {
	Path        string       `json:"path"`
	Instances   List[string] `json:"instances,omitempty"`
	Regex       string       `json:"regex,omitempty"`
	Slice       string       `json:"slice,omitempty"`
	SkipBadRows bool         `json:"skip_bad_rows,omitempty"`
}

// AddInstancesRequest is POST /v1/instances: dataset rows given inline
// (SWE-bench, SWE-smith, SWE-Gym or custom rows, as in a JSONL file).
type AddInstancesRequest struct {
	Rows List[json.RawMessage] `json:"rows"`
}

// InstancesLoaded answers a dataset load or added rows.
type InstancesLoaded struct {
	InstanceIDs List[string] `json:"instance_ids"` // selected, in file order
	// RowErrors are the rows left out (with skip_bad_rows), one line each.
	RowErrors List[string] `json:"row_errors"`
}

// InstanceList is GET /v1/instances.
type InstanceList struct {
	InstanceIDs List[string] `json:"instance_ids"`
}

// InstanceInfo is one known instance: what an agent is told, and how it is
// built and tested.
type InstanceInfo struct {
	InstanceID       string       `json:"instance_id"`
	Repo             string       `json:"repo"`
	BaseCommit       string       `json:"base_commit"`
	Version          string       `json:"version"`
	ProblemStatement string       `json:"problem_statement"`
	FailToPass       List[string] `json:"FAIL_TO_PASS"`
	PassToPass       List[string] `json:"PASS_TO_PASS"`
	Spec             SpecView     `json:"spec"`
}

// Job kinds.
const (
	JobEvaluation = "evaluation" // predictions graded like msb eval
	JobValidation = "validation" // gold and empty patches, like msb validate
)

// Job states.
const (
	JobRunning   = "running"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// JobRequest is POST /v1/jobs: a batch run over known instances, whose
// results go to the harness's files under the daemon's --out directory.
type JobRequest struct {
	Kind  string `json:"kind,omitempty"` // evaluation (default) or validation
	RunID string `json:"run_id"`
	// InstanceIDs are the run's instances (default: every prediction's).
	InstanceIDs List[string] `json:"instance_ids,omitempty"`
	// Predictions are graded (evaluation); Gold grades every instance's
	// reference fix instead.
	Predictions List[Prediction] `json:"predictions,omitempty"`
	Gold        bool             `json:"gold,omitempty"`
	Workers     int              `json:"workers,omitempty"` // default 2
	KeepErrors  bool             `json:"keep_errors,omitempty"`
	// Repeat: as EvaluateRequest's, for every evaluation of the job.
	Repeat int `json:"repeat,omitempty"`
}

// Job is a batch run and its progress.
type Job struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	RunID      string `json:"run_id"`
	State      string `json:"state"`
	Done       int    `json:"done"`
	Total      int    `json:"total"`
	CreatedAt  string `json:"created_at"`
	FinishedAt string `json:"finished_at,omitempty"`
	Error      string `json:"error,omitempty"`
	// OutDir is where the harness's files of the run are.
	OutDir string `json:"out_dir"`
	// Results are the evaluations finished so far, in finishing order.
	Results List[EvalResult] `json:"results"`
	// Report (evaluation) or Validation (validation) once the job ended.
	Report     *RunReport        `json:"report,omitempty"`
	Validation *ValidationReport `json:"validation,omitempty"`
}

// JobList is GET /v1/jobs.
type JobList struct {
	Jobs List[Job] `json:"jobs"`
}

// GymResetRequest starts an episode: a task sandbox for the instance with
// a session named "gym" in /testbed.
type GymResetRequest struct {
	InstanceID      string              `json:"instance_id,omitempty"`
	Instance        json.RawMessage     `json:"instance,omitempty"`
	Labels          Map[string, string] `json:"labels,omitempty"`
	Limits          Limits              `json:"limits,omitempty"`
	LifetimeNs      int64               `json:"lifetime_ns,omitempty"`
	IdleTimeoutNs   int64               `json:"idle_timeout_ns,omitempty"`
	AdmissionWaitNs int64               `json:"admission_wait_ns,omitempty"`
}

// GymObservation is what reset returns: the task and where to act.
type GymObservation struct {
	SandboxID        string `json:"sandbox_id"`
	InstanceID       string `json:"instance_id"`
	ProblemStatement string `json:"problem_statement"`
	Cwd              string `json:"cwd"`
	Session          string `json:"session"`
}

// GymStepRequest is one action: a bash command in the episode's session.
type GymStepRequest struct {
	Command   string `json:"command"`
	TimeoutNs int64  `json:"timeout_ns,omitempty"` // 0: the daemon's step timeout
}

// SubmitMarker, as the first line of a step's output with exit code 0,
// ends the episode (mini-swe-agent's convention): done is true and the
// client calls submit.
const SubmitMarker = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

// GymStep is a step's observation.
type GymStep struct {
	Observation ExecResult `json:"observation"`
	// Done: the episode is over (the submit marker, or the shell exited);
	// call submit for the reward.
	Done bool `json:"done"`
}

// GymSubmitRequest ends an episode: the patch (default: the sandbox's
// diff) is graded in a fresh sandbox; the episode's sandbox is closed
// unless Keep.
type GymSubmitRequest struct {
	Patch *string `json:"patch,omitempty"`
	Model string  `json:"model_name_or_path,omitempty"`
	Keep  bool    `json:"keep,omitempty"`
	// Repeat: as EvaluateRequest's.
	Repeat int `json:"repeat,omitempty"`
}

// GymSubmitResult is the episode's reward.
type GymSubmitResult struct {
	Reward  float64    `json:"reward"`
	Outcome Outcome    `json:"outcome"`
	Done    bool       `json:"done"` // always true
	Result  EvalResult `json:"result"`
	// Flaky: the repeated tests disagreed (Result.Flaky); mask the reward.
	Flaky bool `json:"flaky,omitempty"`
}
