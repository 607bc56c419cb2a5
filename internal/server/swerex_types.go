package server

import (
	"errors"
	"io"
	"net/http"
)

// The wire types of the SWE-ReX routes. Each is one of SWE-ReX 1.4's
// pydantic models (swerex/runtime/abstract.py; the upload form and the 422
// item are FastAPI's), named rex + the model's name where one type is one
// model, with the model's JSON field names; swerex_types_test.go checks
// names, JSON types, required fields and defaults against the installed
// swe-rex package, route by route (rexRouteTable).
//
// A request type's read method fills it from a decoded JSON body with
// pydantic's lax coercions and defaults, in the model's field order, so a
// bad body gets the same 422 list as from swerex-remote. A response type's
// fields are in the order msb has always written them (sorted, as
// encoding/json writes a map); the order carries no meaning in JSON.

// rexRequest is a JSON request model.
type rexRequest interface {
	read(v *validator)
}

// readRex reads v's body into req, then returns the 422 of every bad field.
func readRex(v *validator, req rexRequest) error {
	req.read(v)
	return v.err()
}

// readRexBody reads r's JSON body into req.
func readRexBody(r *http.Request, req rexRequest) error {
	body, err := rexBody(r)
	if err != nil {
		return err
	}
	return readRex(newValidator(body, ""), req)
}

// rexCreateBashSessionRequest is CreateBashSessionRequest (POST /create_session).
type rexCreateBashSessionRequest struct {
	StartupSource  []string `json:"startup_source"`
	Session        string   `json:"session"`
	SessionType    string   `json:"session_type"`
	StartupTimeout float64  `json:"startup_timeout"`
}

func (q *rexCreateBashSessionRequest) read(v *validator) {
	q.StartupSource = v.strList("startup_source", []string{})
	q.Session = v.str("session", "default")
	q.SessionType = "bash"
	q.StartupTimeout = v.float("startup_timeout", 1.0)
}

// rexCreateBashSessionResponse is CreateBashSessionResponse.
type rexCreateBashSessionResponse struct {
	Output      string `json:"output"`
	SessionType string `json:"session_type"`
}

// rexBashAction is BashAction (POST /run_in_session, action_type bash).
type rexBashAction struct {
	Command              string   `json:"command"`
	Session              string   `json:"session"`
	Timeout              *float64 `json:"timeout"`
	IsInteractiveCommand bool     `json:"is_interactive_command"`
	IsInteractiveQuit    bool     `json:"is_interactive_quit"`
	Check                string   `json:"check"` // silent, raise or ignore
	ErrorMsg             string   `json:"error_msg"`
	Expect               []string `json:"expect"`
	ActionType           string   `json:"action_type"`
}

func (a *rexBashAction) read(v *validator) {
	a.Command = v.required("command").str("command", "")
	a.Session = v.str("session", "default")
	a.Timeout = v.optFloat("timeout")
	a.IsInteractiveCommand = v.bool("is_interactive_command", false)
	a.IsInteractiveQuit = v.bool("is_interactive_quit", false)
	a.Check = v.literal("check", "raise", "silent", "raise", "ignore")
	a.ErrorMsg = v.str("error_msg", "")
	a.Expect = v.strList("expect", []string{})
	a.ActionType = "bash"
}

// rexBashInterruptAction is BashInterruptAction (POST /run_in_session,
// action_type bash_interrupt).
type rexBashInterruptAction struct {
	Session    string   `json:"session"`
	Timeout    float64  `json:"timeout"`
	NRetry     int      `json:"n_retry"`
	Expect     []string `json:"expect"`
	ActionType string   `json:"action_type"`
}

func (a *rexBashInterruptAction) read(v *validator) {
	a.Session = v.str("session", "default")
	a.Timeout = v.float("timeout", 0.2)
	a.NRetry = v.int("n_retry", 3)
	a.Expect = v.strList("expect", []string{})
	a.ActionType = "bash_interrupt"
}

// rexBashObservation is BashObservation, the answer to both actions.
type rexBashObservation struct {
	ExitCode      *int   `json:"exit_code"`
	ExpectString  string `json:"expect_string"`
	FailureReason string `json:"failure_reason"`
	Output        string `json:"output"`
	SessionType   string `json:"session_type"`
}

// observation is what a bash session answers: out up to the expect
// string that matched, and the exit code (nil: not checked).
func observation(out string, code *int, expect string) *rexBashObservation {
	return &rexBashObservation{Output: out, ExitCode: code, ExpectString: expect, SessionType: "bash"}
}

// rexCloseBashSessionRequest is CloseBashSessionRequest (POST /close_session).
type rexCloseBashSessionRequest struct {
	Session     string `json:"session"`
	SessionType string `json:"session_type"`
}

func (q *rexCloseBashSessionRequest) read(v *validator) {
	q.Session = v.str("session", "default")
	q.SessionType = "bash"
}

// rexCloseBashSessionResponse is CloseBashSessionResponse.
type rexCloseBashSessionResponse struct {
	SessionType string `json:"session_type"`
}

// rexCommand is Command (POST /execute): a subprocess, as subprocess.run
// takes it.
type rexCommand struct {
	Command            rexArgv            `json:"command"`
	Timeout            *float64           `json:"timeout"`
	Shell              bool               `json:"shell"`
	Check              bool               `json:"check"`
	ErrorMsg           string             `json:"error_msg"`
	Env                *map[string]string `json:"env"`
	Cwd                *string            `json:"cwd"`
	MergeOutputStreams bool               `json:"merge_output_streams"`
}

// rexArgv is Command.command, str | list[str]: a string (a shell command,
// or one program's name) or a list of arguments.
type rexArgv struct {
	Str    string   // the string, or the list joined by spaces
	List   []string // the list, when IsList
	IsList bool
}

func (c *rexCommand) read(v *validator) {
	c.Command.List, c.Command.Str, c.Command.IsList = v.required("command").strOrList("command")
	c.Timeout = v.optFloat("timeout")
	c.Shell = v.bool("shell", false)
	c.Check = v.bool("check", false)
	c.ErrorMsg = v.str("error_msg", "")
	if env, ok := v.optStrMap("env"); ok {
		c.Env = &env
	}
	c.Cwd = v.optStr("cwd")
	c.MergeOutputStreams = v.bool("merge_output_streams", false)
}

// rexCommandResponse is CommandResponse.
type rexCommandResponse struct {
	ExitCode *int   `json:"exit_code"`
	Stderr   string `json:"stderr"`
	Stdout   string `json:"stdout"`
}

// rexReadFileRequest is ReadFileRequest (POST /read_file): the arguments
// of Path.read_text.
type rexReadFileRequest struct {
	Path     string  `json:"path"`
	Encoding *string `json:"encoding"`
	Errors   *string `json:"errors"`
}

func (q *rexReadFileRequest) read(v *validator) {
	q.Path = v.required("path").str("path", "")
	q.Encoding = v.optStr("encoding")
	q.Errors = v.optStr("errors")
}

// rexReadFileResponse is ReadFileResponse.
type rexReadFileResponse struct {
	Content string `json:"content"`
}

// rexWriteFileRequest is WriteFileRequest (POST /write_file).
type rexWriteFileRequest struct {
	Content string `json:"content"`
	Path    string `json:"path"`
}

func (q *rexWriteFileRequest) read(v *validator) {
	q.Content = v.required("content").str("content", "")
	q.Path = v.required("path").str("path", "")
}

// rexUploadForm is the multipart form of POST /upload (FastAPI's
// Body_upload_upload_post): the file's bytes, where they go, and whether
// they are a zip to extract there.
type rexUploadForm struct {
	File       []byte `json:"file"`
	TargetPath string `json:"target_path"`
	Unzip      bool   `json:"unzip"`
}

// readUploadForm reads the upload form, refusing it as FastAPI does.
func readUploadForm(r *http.Request) (rexUploadForm, error) {
	var f rexUploadForm
	if err := r.ParseMultipartForm(32 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return f, err
		}
	}
	var bad []rexValidationError
	file, _, ferr := r.FormFile("file")
	if ferr != nil {
		bad = append(bad, rexValidationError{Type: "missing", Loc: rexLoc{"body", "file"}, Msg: "Field required"})
	}
	target, hasTarget := formValue(r, "target_path")
	if !hasTarget {
		bad = append(bad, rexValidationError{Type: "missing", Loc: rexLoc{"body", "target_path"}, Msg: "Field required"})
	}
	f.TargetPath = target
	if u, ok := formValue(r, "unzip"); ok {
		b, ok := pyBool(u)
		if !ok {
			bad = append(bad, rexValidationError{Type: "bool_parsing", Loc: rexLoc{"body", "unzip"},
				Msg: "Input should be a valid boolean, unable to interpret input", Input: u})
		}
		f.Unzip = b
	}
	if len(bad) > 0 {
		if file != nil {
			file.Close()
		}
		return f, &validationError{bad}
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		return f, err
	}
	f.File = data
	return f, nil
}

// formValue is a field of a multipart or urlencoded form.
func formValue(r *http.Request, key string) (string, bool) {
	if r.MultipartForm != nil {
		if v, ok := r.MultipartForm.Value[key]; ok && len(v) > 0 {
			return v[0], true
		}
	}
	if v, ok := r.Form[key]; ok && len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// rexIsAliveResponse is IsAliveResponse (GET /is_alive).
type rexIsAliveResponse struct {
	IsAlive bool   `json:"is_alive"`
	Message string `json:"message"`
}

// rexRootResponse is the answer of GET / (a dict in SWE-ReX, no model).
type rexRootResponse struct {
	Message string `json:"message"`
}

// rexEmptyResponse is the empty models: WriteFileResponse, UploadResponse
// and CloseResponse.
type rexEmptyResponse struct{}

// rexExceptionTransfer is _ExceptionTransfer: an exception the runtime
// raised, which SWE-ReX's client raises again from class_path. It goes
// out as rexExceptionBody with status 511.
type rexExceptionTransfer struct {
	ClassPath string         `json:"class_path"`
	ExtraInfo map[string]any `json:"extra_info"`
	Message   string         `json:"message"`
	Traceback string         `json:"traceback"`
}

// rexExceptionBody is the body of a 511.
type rexExceptionBody struct {
	Swerexception rexExceptionTransfer `json:"swerexception"`
}

// rexValidationError is one refusal of a 422 (FastAPI's ValidationError,
// as pydantic reports it): its kind, where in the request, the message,
// the value refused and the kind's parameters.
type rexValidationError struct {
	Ctx   map[string]any `json:"ctx,omitempty"`
	Input any            `json:"input"`
	Loc   rexLoc         `json:"loc"`
	Msg   string         `json:"msg"`
	Type  string         `json:"type"`
}

// rexLoc is where a refused value is: "body", then the union's tag, field
// names and list indexes.
type rexLoc []any

// rexValidationBody is the body of a 422.
type rexValidationBody struct {
	Detail []rexValidationError `json:"detail"`
}

// rexDetail is the body of FastAPI's 401, 404, 405 and 413 (and msb's 503).
type rexDetail struct {
	Detail string `json:"detail"`
}
