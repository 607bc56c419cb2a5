package server

import (
	"net/http"

	"github.com/minisandbox/msb/internal/api"
)

// route is one native route: the mux pattern, the handler, and what the
// OpenAPI document says of it.
type route struct {
	method, path string
	op           string // operationId
	tag          string
	summary      string
	query        []param
	// req is the JSON request body's type (nil: none); reqType names a
	// non-JSON body instead (application/octet-stream, application/x-tar).
	req     any
	reqType string
	// resp is the JSON answer's type (nil with respType: another content
	// type; nil without: no body).
	resp     any
	respType string
	// alt is another JSON answer's type the route may give (the
	// document says oneOf resp and alt).
	alt    any
	status int
	errors []int // statuses of the error answers besides 400/401/500/503
	h      handler
}

type param struct {
	name, typ, doc string
	required       bool
}

var (
	pathQuery = param{name: "path", typ: "string", doc: "an absolute path inside the sandbox", required: true}
	stdErrors = []int{http.StatusNotFound, http.StatusGone}
)

// routes is the native API: every route of /v1 but the OpenAPI document.
func (s *Server) routes() []route {
	return append([]route{
		{method: "GET", path: "/v1/health", op: "health", tag: "daemon", summary: "the daemon's state, mode, limits' enforcement and quota",
			resp: api.Health{}, status: 200, h: s.health},

		{method: "POST", path: "/v1/sandboxes", op: "createSandbox", tag: "sandboxes", summary: "create a sandbox: a task sandbox for an instance (by id or an inline row) or one from raw layers; with count, that many (all or none), answered as a SandboxList",
			req: api.CreateSandboxRequest{}, resp: api.SandboxInfo{}, alt: api.SandboxList{}, status: 201, errors: []int{404, 409, 413, 429, 507}, h: s.createSandbox},
		{method: "GET", path: "/v1/sandboxes", op: "listSandboxes", tag: "sandboxes", summary: "live sandboxes whose labels include every label given, oldest first",
			query: []param{{name: "label", typ: "string", doc: "k=v; repeatable"}}, resp: api.SandboxList{}, status: 200, h: s.listSandboxes},
		{method: "GET", path: "/v1/sandboxes/{id}", op: "getSandbox", tag: "sandboxes", summary: "a sandbox, live or closed recently (state says closed or reaped, and why)",
			resp: api.SandboxInfo{}, status: 200, errors: []int{404}, h: s.getSandbox},
		{method: "DELETE", path: "/v1/sandboxes/{id}", op: "deleteSandbox", tag: "sandboxes", summary: "close a sandbox: kill everything in it and remove it",
			resp: api.SandboxInfo{}, status: 200, errors: stdErrors, h: s.deleteSandbox},

		{method: "POST", path: "/v1/sandboxes/{id}/exec", op: "exec", tag: "exec", summary: "run one command (in a fresh bash, or in a session) and return its result",
			req: api.ExecRequest{}, resp: api.ExecResult{}, status: 200, errors: []int{404, 409, 410, 413}, h: s.exec},
		{method: "POST", path: "/v1/sandboxes/{id}/exec/stream", op: "execStream", tag: "exec", summary: "run one command in a fresh bash, streaming its output as NDJSON ExecEvents (or server-sent events)",
			req: api.ExecRequest{}, resp: api.ExecEvent{}, respType: "application/x-ndjson", status: 200, errors: []int{404, 410, 413}, h: s.execStream},

		{method: "GET", path: "/v1/sandboxes/{id}/sessions", op: "listSessions", tag: "sessions", summary: "the sandbox's sessions",
			resp: api.SessionList{}, status: 200, errors: stdErrors, h: s.listSessions},
		{method: "POST", path: "/v1/sandboxes/{id}/sessions", op: "createSession", tag: "sessions", summary: "start a persistent bash",
			req: api.SessionRequest{}, resp: api.SessionInfo{}, status: 201, errors: []int{404, 409, 410}, h: s.createSession},
		{method: "POST", path: "/v1/sandboxes/{id}/sessions/{name}/exec", op: "sessionExec", tag: "sessions", summary: "run a command in the session",
			req: api.ExecRequest{}, resp: api.ExecResult{}, status: 200, errors: []int{404, 409, 410, 413}, h: s.sessionExec},
		{method: "POST", path: "/v1/sandboxes/{id}/sessions/{name}/interrupt", op: "interruptSession", tag: "sessions", summary: "Ctrl-C for the command running in the session",
			resp: api.InterruptResult{}, status: 200, errors: stdErrors, h: s.interruptSession},
		{method: "DELETE", path: "/v1/sandboxes/{id}/sessions/{name}", op: "closeSession", tag: "sessions", summary: "end the session and everything it started",
			status: 204, errors: stdErrors, h: s.closeSession},

		{method: "GET", path: "/v1/sandboxes/{id}/files", op: "readFile", tag: "files", summary: "a file's bytes",
			query:    []param{pathQuery, {name: "max_bytes", typ: "integer", doc: "refuse a larger file (default 64 MiB)"}},
			respType: "application/octet-stream", status: 200, errors: stdErrors, h: s.readFile},
		{method: "PUT", path: "/v1/sandboxes/{id}/files", op: "writeFile", tag: "files", summary: "write a file (parent directories are created)",
			query:   []param{pathQuery, {name: "mode", typ: "string", doc: "octal file mode (default 0644)"}},
			reqType: "application/octet-stream", resp: api.FileWritten{}, status: 200, errors: []int{404, 410, 413}, h: s.writeFile},
		{method: "GET", path: "/v1/sandboxes/{id}/files/stat", op: "statFile", tag: "files", summary: "one path's entry (a symlink itself)",
			query: []param{pathQuery}, resp: api.FileEntry{}, status: 200, errors: stdErrors, h: s.statFile},
		{method: "GET", path: "/v1/sandboxes/{id}/files/list", op: "listFiles", tag: "files", summary: "a directory's entries",
			query: []param{pathQuery}, resp: api.FileList{}, status: 200, errors: stdErrors, h: s.listFiles},
		{method: "GET", path: "/v1/sandboxes/{id}/files/tar", op: "downloadTar", tag: "files", summary: "a file or directory packed as tar",
			query: []param{pathQuery}, respType: "application/x-tar", status: 200, errors: stdErrors, h: s.getTar},
		{method: "PUT", path: "/v1/sandboxes/{id}/files/tar", op: "uploadTar", tag: "files", summary: "unpack a tar into a directory (created)",
			query: []param{pathQuery}, reqType: "application/x-tar", resp: api.FileWritten{}, status: 200, errors: []int{404, 410, 413}, h: s.putTar},

		{method: "GET", path: "/v1/sandboxes/{id}/diff", op: "diff", tag: "tasks", summary: "the agent's patch against the task's starting state",
			resp: api.Diff{}, status: 200, errors: []int{404, 409, 410}, h: s.diff},
		{method: "POST", path: "/v1/sandboxes/{id}/evaluate", op: "evaluate", tag: "tasks", summary: "grade a patch (default: the sandbox's diff) in a FRESH sandbox of the same instance",
			req: api.EvaluateRequest{}, resp: api.EvaluateResponse{}, status: 200, errors: []int{404, 409, 410, 429, 507}, h: s.evaluate},

		{method: "POST", path: "/v1/datasets", op: "loadDataset", tag: "instances", summary: "load a dataset file on the daemon's host",
			req: api.LoadDatasetRequest{}, resp: api.InstancesLoaded{}, status: 200, errors: []int{404}, h: s.loadDataset},
		{method: "POST", path: "/v1/instances", op: "addInstances", tag: "instances", summary: "add dataset rows given inline",
			req: api.AddInstancesRequest{}, resp: api.InstancesLoaded{}, status: 200, h: s.addInstances},
		{method: "GET", path: "/v1/instances", op: "listInstances", tag: "instances", summary: "the known instances",
			resp: api.InstanceList{}, status: 200, h: s.listInstances},
		{method: "GET", path: "/v1/instances/{instance_id}", op: "getInstance", tag: "instances", summary: "an instance: problem statement, tests, resolved spec",
			resp: api.InstanceInfo{}, status: 200, errors: []int{404}, h: s.getInstance},
		{method: "GET", path: "/v1/instances/{instance_id}/layers", op: "getInstanceLayers", tag: "instances", summary: "the layers a task of the instance needs and which this cache holds (builds nothing; for placement by cache affinity)",
			resp: api.InstanceLayers{}, status: 200, errors: []int{404}, h: s.getInstanceLayers},

		{method: "POST", path: "/v1/jobs", op: "createJob", tag: "jobs", summary: "start a batch evaluation or validation writing the harness's files",
			req: api.JobRequest{}, resp: api.Job{}, status: 202, errors: []int{404}, h: s.createJob},
		{method: "GET", path: "/v1/jobs", op: "listJobs", tag: "jobs", summary: "the jobs",
			resp: api.JobList{}, status: 200, h: s.listJobs},
		{method: "GET", path: "/v1/jobs/{job_id}", op: "getJob", tag: "jobs", summary: "a job's progress, results so far and report",
			resp: api.Job{}, status: 200, errors: []int{404}, h: s.getJob},
		{method: "DELETE", path: "/v1/jobs/{job_id}", op: "cancelJob", tag: "jobs", summary: "cancel a job (what finished is kept; the same run_id resumes)",
			resp: api.Job{}, status: 200, errors: []int{404}, h: s.cancelJob},
		{method: "POST", path: "/v1/results/reusable", op: "checkReuse", tag: "jobs", summary: "whether results an earlier run stored stand for a run's evaluations of one instance (the rule runs resume by)",
			req: api.ReuseRequest{}, resp: api.Reuse{}, status: 200, errors: []int{404}, h: s.reusable},

		{method: "POST", path: "/v1/gym/reset", op: "gymReset", tag: "gym", summary: "start an episode: a task sandbox and a session in /testbed",
			req: api.GymResetRequest{}, resp: api.GymObservation{}, status: 201, errors: []int{404, 413, 429, 507}, h: s.gymReset},
		{method: "POST", path: "/v1/gym/{id}/step", op: "gymStep", tag: "gym", summary: "one bash command in the episode's session",
			req: api.GymStepRequest{}, resp: api.GymStep{}, status: 200, errors: []int{404, 409, 410, 413}, h: s.gymStep},
		{method: "POST", path: "/v1/gym/{id}/submit", op: "gymSubmit", tag: "gym", summary: "end the episode: the reward from grading in a fresh sandbox",
			req: api.GymSubmitRequest{}, resp: api.GymSubmitResult{}, status: 200, errors: []int{404, 409, 410, 429}, h: s.gymSubmit},
	}, append(s.snapshotRoutes(), s.portRoutes()...)...)
}
