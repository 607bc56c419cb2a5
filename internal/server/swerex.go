package server

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox"
)

// The SWE-ReX-compatible routes: what swerex-remote (SWE-ReX 1.4's
// server.py over runtime/local.py) answers, field for field, for one
// sandbox. Facts from SWE-ReX; the code is msb's.

// rexPS1 is the prompt SWE-ReX's sessions use; an observation's
// expect_string is it when the command simply finished.
const rexPS1 = "SHELLPS1PREFIX"

// rexState is the SWE-ReX view of every sandbox used through these routes.
type rexState struct {
	mu   sync.Mutex // guards byID
	byID map[string]*rexSandbox
}

// rexSandbox is one sandbox's sessions and its last answer.
type rexSandbox struct {
	mu       sync.Mutex // guards the fields below
	sessions map[string]*rexSession
	lastID   string
	last     *recorded
}

// rexSession is a SWE-ReX session: an engine session, the commands that
// timed out and still run (their results come back at an interrupt), and
// whether an interactive command runs in it.
type rexSession struct {
	engineName  string
	mu          sync.Mutex // guards pending and interactive
	pending     []chan execOutcome
	interactive bool
}

func (rs *rexSession) isInteractive() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.interactive
}

func (rs *rexSession) setInteractive(running bool) {
	rs.mu.Lock()
	rs.interactive = running
	rs.mu.Unlock()
}

type execOutcome struct {
	res api.ExecResult
	err error
}

func newRexState() *rexState { return &rexState{byID: map[string]*rexSandbox{}} }

func (st *rexState) of(id string) *rexSandbox {
	st.mu.Lock()
	defer st.mu.Unlock()
	x := st.byID[id]
	if x == nil {
		x = &rexSandbox{sessions: map[string]*rexSession{}}
		st.byID[id] = x
	}
	return x
}

func (st *rexState) forget(id string) {
	st.mu.Lock()
	delete(st.byID, id)
	st.mu.Unlock()
}

// rexError is an exception the runtime raises: 511 with its class path.
type rexError struct {
	classPath string
	msg       string
	extra     map[string]any
}

func (e *rexError) Error() string { return e.msg }

func raise(classPath, format string, args ...any) error {
	return &rexError{classPath: classPath, msg: fmt.Sprintf(format, args...)}
}

const (
	excTimeout       = "swerex.exceptions.CommandTimeoutError"
	excSyntax        = "swerex.exceptions.BashIncorrectSyntaxError"
	excNonZero       = "swerex.exceptions.NonZeroExitCodeError"
	excSessionExists = "swerex.exceptions.SessionExistsError"
	excNoSession     = "swerex.exceptions.SessionDoesNotExistError"
	excSwerex        = "swerex.exceptions.SwerexException"
	excPexpectTime   = "pexpect.exceptions.TIMEOUT"
	excFileNotFound  = "builtins.FileNotFoundError"
	excIsADirectory  = "builtins.IsADirectoryError"
	excLookup        = "builtins.LookupError"
	excUnicode       = "builtins.UnicodeDecodeError"
	excOSError       = "builtins.OSError"
)

// validationError is a 422 with pydantic's detail list.
type validationError struct{ detail []rexValidationError }

func (e *validationError) Error() string { return fmt.Sprintf("%d validation errors", len(e.detail)) }

// rexHandler answers one SWE-ReX route for a sandbox.
type rexHandler func(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (any, error)

// rexRoute is one SWE-ReX route: its path under the sandbox's prefix, its
// method, the models its body reads as (one per discriminator tag; none
// for no body) and the model it answers 200 with (its handler's answer
// type, so that the table cannot name another).
type rexRoute struct {
	path, method string
	req          []any
	resp         any
	h            rexHandler
}

// newRexRoute makes a route of a handler that answers Resp.
func newRexRoute[Resp any](method, path string, req []any, h func(*http.Request, *engine.Sandbox, *rexSandbox) (*Resp, error)) rexRoute {
	return rexRoute{path: path, method: method, req: req, resp: *new(Resp), h: func(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (any, error) {
		resp, err := h(r, sb, x)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}}
}

// rexRouteTable is every route swerex-remote serves.
func (s *Server) rexRouteTable() []rexRoute {
	return []rexRoute{
		newRexRoute("GET", "/", nil, rexRoot),
		newRexRoute("GET", "/is_alive", nil, s.rexIsAlive),
		newRexRoute("POST", "/create_session", []any{rexCreateBashSessionRequest{}}, s.rexCreateSession),
		newRexRoute("POST", "/run_in_session", []any{rexBashAction{}, rexBashInterruptAction{}}, s.rexRun),
		newRexRoute("POST", "/close_session", []any{rexCloseBashSessionRequest{}}, s.rexCloseSession),
		newRexRoute("POST", "/execute", []any{rexCommand{}}, s.rexExecute),
		newRexRoute("POST", "/read_file", []any{rexReadFileRequest{}}, s.rexReadFile),
		newRexRoute("POST", "/write_file", []any{rexWriteFileRequest{}}, s.rexWriteFile),
		newRexRoute("POST", "/upload", []any{rexUploadForm{}}, s.rexUpload),
		newRexRoute("POST", "/close", nil, s.rexClose),
	}
}

// rexRoutes registers the SWE-ReX routes under prefix, for the sandbox in
// the path ({id}) or, with fixed, for that one.
func (s *Server) rexRoutes(mux *http.ServeMux, prefix, fixed string) {
	for _, rt := range s.rexRouteTable() {
		pattern := prefix + rt.path
		if rt.path == "/" {
			pattern += "{$}"
		}
		mux.Handle(pattern, s.rexWrap(rt.method, fixed, rt.h))
	}
}

func rexRoot(*http.Request, *engine.Sandbox, *rexSandbox) (*rexRootResponse, error) {
	return &rexRootResponse{Message: "hello world"}, nil
}

// isRex says whether a request is for the SWE-ReX routes (they answer
// errors SWE-ReX's way).
func (s *Server) isRex(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, "/swerex/") ||
		s.o.RootSandbox != "" && !strings.HasPrefix(p, "/v1/") && p != "/metrics"
}

func (s *Server) rexUnauthorized(w http.ResponseWriter, missing bool) {
	if missing {
		w.Header().Set("WWW-Authenticate", "APIKey")
		writeJSON(w, http.StatusUnauthorized, rexDetail{"Not authenticated"})
		return
	}
	writeJSON(w, http.StatusUnauthorized, rexDetail{"Invalid API Key"})
}

// recorded is an answer kept for X-Request-ID replay.
type recorded struct {
	status int
	body   []byte
}

func (s *Server) rexWrap(method, fixed string, h rexHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := fixed
		if id == "" {
			id = r.PathValue("id")
		}
		rec := s.rexServe(method, id, h, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.status)
		w.Write(rec.body)
		s.metrics.request("swerex "+strings.TrimPrefix(r.URL.Path, "/swerex/"+id), rec.status, time.Since(start))
		s.log.Debug("swerex request", "request_id", requestID(r), "sandbox", id, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
	})
}

func (s *Server) rexServe(method, id string, h rexHandler, r *http.Request) *recorded {
	answer := func(status int, v any) *recorded {
		b, _ := json.Marshal(v)
		return &recorded{status: status, body: b}
	}
	if r.Method != method {
		return answer(http.StatusMethodNotAllowed, rexDetail{"Method Not Allowed"})
	}
	if s.closing.Load() {
		return answer(http.StatusServiceUnavailable, rexDetail{"the daemon is shutting down"})
	}
	sb, err := s.e.Sandbox(id)
	if err != nil {
		s.rex.forget(id) // closed or reaped: its sessions are gone too
		status, _ := classify(err)
		return answer(status, rexDetail{err.Error()})
	}
	x := s.rex.of(id)
	reqID := r.Header.Get("X-Request-ID")
	if reqID != "" {
		x.mu.Lock()
		last, lastID := x.last, x.lastID
		x.mu.Unlock()
		if last != nil && lastID == reqID {
			return last
		}
	}
	r.Body = http.MaxBytesReader(nil, r.Body, s.o.MaxBody)
	body, err := h(r, sb, x)
	var out *recorded
	var ve *validationError
	var re *rexError
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		out = answer(http.StatusOK, body)
	case errors.As(err, &ve):
		out = answer(http.StatusUnprocessableEntity, rexValidationBody{ve.detail})
	case errors.As(err, &mbe):
		out = answer(http.StatusRequestEntityTooLarge, rexDetail{err.Error()})
	case errors.As(err, &re):
		extra := re.extra
		if extra == nil {
			extra = map[string]any{}
		}
		out = answer(511, rexExceptionBody{rexExceptionTransfer{Message: re.msg, ClassPath: re.classPath, ExtraInfo: extra}})
	default:
		// Failures of msb itself reach the client as SWE-ReX's base exception.
		out = answer(511, rexExceptionBody{rexExceptionTransfer{Message: err.Error(), ClassPath: excSwerex, ExtraInfo: map[string]any{}}})
	}
	if reqID != "" {
		x.mu.Lock()
		x.lastID, x.last = reqID, out
		x.mu.Unlock()
	}
	return out
}

func (s *Server) rexIsAlive(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexIsAliveResponse, error) {
	return &rexIsAliveResponse{IsAlive: true}, nil
}

func (x *rexSandbox) session(name string) (*rexSession, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rs, ok := x.sessions[name]
	if !ok {
		return nil, raise(excNoSession, "session %s does not exist", pyRepr(name))
	}
	return rs, nil
}

// engineSession is the engine's name for a SWE-ReX session.
func engineSession(name string) string {
	if api.CheckName("session", name) == nil && len(name) < 200 {
		return "swerex-" + name
	}
	sum := sha256.Sum256([]byte(name))
	return "swerex-" + hex.EncodeToString(sum[:8])
}

func (s *Server) rexCreateSession(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexCreateBashSessionResponse, error) {
	body, err := rexBody(r)
	if err != nil {
		return nil, err
	}
	v := newValidator(body, "")
	if err := v.tag("session_type", "bash"); err != nil {
		return nil, err
	}
	var req rexCreateBashSessionRequest
	if err := readRex(v, &req); err != nil {
		return nil, err
	}
	name := req.Session
	x.mu.Lock()
	if _, ok := x.sessions[name]; ok {
		x.mu.Unlock()
		return nil, raise(excSessionExists, "session %s already exists", name)
	}
	rs := &rexSession{engineName: engineSession(name)}
	x.sessions[name] = rs
	x.mu.Unlock()
	fail := func(err error) (*rexCreateBashSessionResponse, error) {
		x.mu.Lock()
		delete(x.sessions, name)
		x.mu.Unlock()
		sb.CloseSession(context.WithoutCancel(r.Context()), rs.engineName)
		return nil, err
	}
	if err := sb.OpenSession(r.Context(), api.SessionRequest{Name: rs.engineName}); err != nil {
		return fail(err)
	}
	out := ""
	if len(req.StartupSource) > 0 {
		cmds := make([]string, len(req.StartupSource))
		for i, p := range req.StartupSource {
			cmds[i] = "source " + p
		}
		res, err := sb.Exec(r.Context(), api.ExecRequest{Session: rs.engineName, Command: strings.Join(cmds, " ; "), TimeoutNs: seconds(req.StartupTimeout)})
		if err != nil {
			return fail(err)
		}
		if res.TimedOut {
			return fail(raise(excPexpectTime, "Timeout exceeded."))
		}
		out = res.Stdout
	}
	return &rexCreateBashSessionResponse{Output: out, SessionType: "bash"}, nil
}

func seconds(f float64) int64 { return int64(f * float64(time.Second)) }

func (s *Server) rexRun(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexBashObservation, error) {
	body, err := rexBody(r)
	if err != nil {
		return nil, err
	}
	tag, ok := body["action_type"]
	if !ok {
		return nil, tagNotFound(body, "action_type")
	}
	switch tag {
	case "bash":
		return s.rexBash(r, sb, x, body)
	case "bash_interrupt":
		return s.rexInterrupt(r, sb, x, body)
	}
	return nil, tagInvalid(body, "action_type", tag, "bash", "bash_interrupt")
}

func (s *Server) rexBash(r *http.Request, sb *engine.Sandbox, x *rexSandbox, body map[string]any) (*rexBashObservation, error) {
	var a rexBashAction
	if err := readRex(newValidator(body, "bash"), &a); err != nil {
		return nil, err
	}
	command, name, timeout, expect := a.Command, a.Session, a.Timeout, a.Expect
	rs, err := x.session(name)
	if err != nil {
		return nil, err
	}
	if a.IsInteractiveCommand || a.IsInteractiveQuit {
		return s.rexInteractive(x, sb, rs, name, command, a.IsInteractiveQuit, timeout, expect)
	}
	if rs.isInteractive() {
		return nil, raise(excSwerex, "an interactive command runs in session %s: send it input with is_interactive_command, quit it with is_interactive_quit, or interrupt it", pyRepr(name))
	}
	if err := bashSyntax(r.Context(), sb, command); err != nil {
		return nil, err
	}
	// The command runs on after a timeout, until an interrupt: it is not
	// tied to this request.
	done := make(chan execOutcome, 1)
	go func() {
		res, err := sb.Exec(s.base, api.ExecRequest{Session: rs.engineName, Command: command})
		done <- execOutcome{res, err}
	}()
	var timer <-chan time.Time
	if timeout != nil {
		t := time.NewTimer(time.Duration(*timeout * float64(time.Second)))
		defer t.Stop()
		timer = t.C
	}
	var end execOutcome
	select {
	case end = <-done:
	case <-timer:
		rs.mu.Lock()
		rs.pending = append(rs.pending, done)
		rs.mu.Unlock()
		return nil, raise(excTimeout, "timeout after %s seconds while running command %s", pyFloat(*timeout), pyRepr(command))
	}
	if end.err != nil {
		return nil, end.err
	}
	res := end.res
	if res.SessionEnded {
		x.forgetSession(name)
	}
	out, matched := res.Stdout, rexPS1
	if m, before, ok := firstMatch(expect, out); ok {
		out, matched = before, m
	}
	code := res.ExitCode
	switch a.Check {
	case "ignore":
		return observation(out, nil, matched), nil
	case "raise":
		if code != 0 {
			msg := fmt.Sprintf("Command %s failed with exit code %d. Here is the output:\n%s", pyRepr(command), code, pyRepr(out))
			if a.ErrorMsg != "" {
				msg = a.ErrorMsg + ": " + msg
			}
			return nil, raise(excNonZero, "%s", msg)
		}
	}
	return observation(out, &code, matched), nil
}

func (x *rexSandbox) forgetSession(name string) {
	x.mu.Lock()
	delete(x.sessions, name)
	x.mu.Unlock()
}

// rexInteractive runs an interactive action as SWE-ReX does: the command
// goes to the session as a line (the shell runs it, or the interactive
// program that runs reads it), and the answer is the output up to the
// first expect pattern or, when the program ends, up to the prompt. The
// session's own framing, not a printed prompt, says that it ended.
func (s *Server) rexInteractive(x *rexSandbox, sb *engine.Sandbox, rs *rexSession, name, command string, quit bool, timeout *float64, expect []string) (*rexBashObservation, error) {
	patterns := rexPatterns(expect)
	req := api.ExecRequest{Session: rs.engineName, Command: command, Expect: patterns}
	if timeout != nil {
		req.TimeoutNs = seconds(*timeout)
	}
	if rs.isInteractive() {
		req.Input, req.Command = true, command+"\n"
	} else {
		req.Interactive = true
	}
	res, err := sb.Exec(s.base, req)
	if err != nil {
		return nil, err
	}
	rs.setInteractive(res.Running)
	if res.SessionEnded {
		x.forgetSession(name)
	}
	if res.Running && res.TimedOut {
		return nil, raise(excTimeout, "timeout after %s seconds while running command %s", pyFloat(*timeout), pyRepr(command))
	}
	out, matched := rexObserved(res, patterns, expect)
	if !quit {
		out = strings.TrimSpace(strings.TrimPrefix(strings.TrimLeft(out, " \t\r\n\v\f"), command))
	}
	zero := 0
	return observation(out, &zero, matched), nil
}

// rexPatterns turns SWE-ReX's expect strings (Python regular expressions)
// into the engine's: the same text where RE2 reads it, else the literal.
func rexPatterns(expect []string) []string {
	out := make([]string, len(expect))
	for i, p := range expect {
		out[i] = p
		if _, err := regexp.Compile(p); err != nil {
			out[i] = regexp.QuoteMeta(p)
		}
	}
	return out
}

// rexObserved is an interactive result's output and expect_string: the
// caller's pattern that matched, or, once the program ended, the earliest
// pattern in its last output or the prompt.
func rexObserved(res api.ExecResult, patterns, expect []string) (string, string) {
	if res.Running {
		for i, p := range patterns {
			if p == res.Matched {
				return res.Stdout, expect[i]
			}
		}
		return res.Stdout, res.Matched
	}
	if m, before, ok := firstMatch(expect, res.Stdout); ok {
		return before, m
	}
	return res.Stdout, rexPS1
}

// firstMatch finds the expect pattern (a regular expression, as pexpect
// reads it) that matches earliest in out.
func firstMatch(patterns []string, out string) (pattern, before string, ok bool) {
	best := -1
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			re = regexp.MustCompile(regexp.QuoteMeta(p))
		}
		if loc := re.FindStringIndex(out); loc != nil && (best < 0 || loc[0] < best) {
			best, pattern, before = loc[0], p, out[:loc[0]]
		}
	}
	return pattern, before, best >= 0
}

// bashSyntax checks command with bash -n inside the sandbox, as SWE-ReX
// does before running it.
func bashSyntax(ctx context.Context, sb *engine.Sandbox, command string) error {
	const eof = "SOUNIQUEEOF"
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "/usr/bin/env bash -n << '" + eof + "'\n" + command + "\n" + eof, SeparateStderr: true, TimeoutNs: int64(time.Minute)})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 {
		return nil
	}
	msg := fmt.Sprintf("Error (exit code %d) while checking bash command \n%s\n---- Stderr ----\n%s\n---- Stdout ----\n%s", res.ExitCode, pyRepr(command), res.Stderr, res.Stdout)
	return &rexError{classPath: excSyntax, msg: msg, extra: map[string]any{"bash_stdout": res.Stdout, "bash_stderr": res.Stderr}}
}

func (s *Server) rexInterrupt(r *http.Request, sb *engine.Sandbox, x *rexSandbox, body map[string]any) (*rexBashObservation, error) {
	var a rexBashInterruptAction
	if err := readRex(newValidator(body, "bash_interrupt"), &a); err != nil {
		return nil, err
	}
	expect := a.Expect
	rs, err := x.session(a.Session)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	pending := rs.pending
	rs.pending = nil
	rs.mu.Unlock()
	zero := 0
	if len(pending) == 0 && rs.isInteractive() {
		// Ctrl-C to the interactive program: it ends (then the prompt
		// comes back), or survives and prints an expected pattern.
		patterns := rexPatterns(expect)
		res, err := sb.Exec(s.base, api.ExecRequest{Session: rs.engineName, Input: true, Interrupt: true, Expect: patterns})
		if err != nil {
			return nil, err
		}
		rs.setInteractive(res.Running)
		out, matched := rexObserved(res, patterns, expect)
		return observation(strings.TrimSpace(out), &zero, matched), nil
	}
	if len(pending) == 0 {
		return observation("", &zero, rexPS1), nil
	}
	if _, err := sb.InterruptSession(r.Context(), rs.engineName); err != nil {
		return nil, err
	}
	// Ctrl-C, then SIGKILL after the session's grace; the command is gone
	// within a few seconds, however it handles SIGINT.
	wait := time.NewTimer(max(time.Duration(float64(a.NRetry)*a.Timeout*float64(time.Second)), 10*time.Second))
	defer wait.Stop()
	var out strings.Builder
	for _, ch := range pending {
		select {
		case end := <-ch:
			out.WriteString(end.res.Stdout)
		case <-wait.C:
			return nil, raise(excPexpectTime, "Failed to interrupt session")
		}
	}
	text, matched := out.String(), rexPS1
	if m, before, ok := firstMatch(expect, text); ok {
		text, matched = before, m
	}
	return observation(strings.TrimSpace(text), &zero, matched), nil
}

func (s *Server) rexCloseSession(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexCloseBashSessionResponse, error) {
	body, err := rexBody(r)
	if err != nil {
		return nil, err
	}
	v := newValidator(body, "")
	if err := v.tag("session_type", "bash"); err != nil {
		return nil, err
	}
	var req rexCloseBashSessionRequest
	if err := readRex(v, &req); err != nil {
		return nil, err
	}
	rs, err := x.session(req.Session)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	delete(x.sessions, req.Session)
	x.mu.Unlock()
	if err := sb.CloseSession(r.Context(), rs.engineName); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return nil, err
	}
	return &rexCloseBashSessionResponse{SessionType: "bash"}, nil
}

func (s *Server) rexClose(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexEmptyResponse, error) {
	x.mu.Lock()
	sessions := x.sessions
	x.sessions = map[string]*rexSession{}
	x.mu.Unlock()
	for _, rs := range sessions {
		if err := sb.CloseSession(r.Context(), rs.engineName); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			return nil, err
		}
	}
	return &rexEmptyResponse{}, nil
}

func (s *Server) rexExecute(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexCommandResponse, error) {
	var c rexCommand
	if err := readRexBody(r, &c); err != nil {
		return nil, err
	}
	argv, cmdStr, isList := c.Command.List, c.Command.Str, c.Command.IsList
	timeout, cwd := c.Timeout, c.Cwd
	nonce := newRequestID()
	var script strings.Builder
	script.WriteString("exec </dev/null\n")
	if c.Env != nil {
		script.WriteString("for __msb_v in $(compgen -e); do unset \"$__msb_v\" 2>/dev/null; done; unset __msb_v\n")
		for k, val := range *c.Env {
			script.WriteString("export " + shellQuote(k+"="+val) + "\n")
		}
	}
	if cwd != nil {
		fmt.Fprintf(&script, "cd -- %s 2>/dev/null || { printf %%s %s >&2; exit 127; }\n", shellQuote(*cwd), shellQuote(nonce+"cwd"))
	}
	repr := pyRepr(cmdStr)
	switch {
	case c.Shell && isList:
		script.WriteString(strings.Join(argv, " "))
		repr = pyList(argv)
	case c.Shell:
		script.WriteString(cmdStr)
	default:
		if !isList {
			argv = []string{cmdStr}
		} else {
			repr = pyList(argv)
		}
		if len(argv) == 0 {
			return nil, raise("builtins.IndexError", "list index out of range")
		}
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = shellQuote(a)
		}
		fmt.Fprintf(&script, "command -v -- %s >/dev/null 2>&1 || { printf %%s %s >&2; exit 127; }\nexec -- %s", quoted[0], shellQuote(nonce+"exe"), strings.Join(quoted, " "))
	}
	req := api.ExecRequest{Command: script.String(), SeparateStderr: !c.MergeOutputStreams}
	if timeout != nil {
		req.TimeoutNs = seconds(*timeout)
	}
	res, err := sb.Exec(r.Context(), req)
	if err != nil {
		return nil, err
	}
	if res.ExitCode == 127 {
		switch strings.TrimSpace(res.Stderr + res.Stdout) {
		case nonce + "cwd":
			return nil, raise(excFileNotFound, "[Errno 2] No such file or directory: %s", pyRepr(*cwd))
		case nonce + "exe":
			return nil, raise(excFileNotFound, "[Errno 2] No such file or directory: %s", pyRepr(argv[0]))
		}
	}
	if res.TimedOut {
		return nil, raise(excTimeout, "Timeout (%ss) exceeded while running command", pyFloat(*timeout))
	}
	if c.Check && res.ExitCode != 0 {
		msg := fmt.Sprintf("Command %s failed with exit code %d. Stdout:\n%s\nStderr:\n%s", repr, res.ExitCode, pyRepr(res.Stdout), pyRepr(res.Stderr))
		if c.ErrorMsg != "" {
			msg = c.ErrorMsg + ": " + msg
		}
		return nil, raise(excNonZero, "%s", msg)
	}
	code := res.ExitCode
	return &rexCommandResponse{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: &code}, nil
}

// rexPath makes a path absolute the way a process in the sandbox would
// see it (relative paths from the task's repository, or /).
func rexPath(sb *engine.Sandbox, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	if dir := sb.RepoDir(); dir != "" {
		return path.Join(dir, p)
	}
	return path.Join("/", p)
}

// osError turns a file error into the Python exception open() raises.
func osError(ctx context.Context, sb *engine.Sandbox, p, shown string, err error) error {
	if errors.Is(err, sandbox.ErrNotFound) {
		return raise(excFileNotFound, "[Errno 2] No such file or directory: %s", pyRepr(shown))
	}
	if fe, serr := sb.Stat(ctx, p); serr == nil && fe.Type == "dir" {
		return raise(excIsADirectory, "[Errno 21] Is a directory: %s", pyRepr(shown))
	}
	if errors.Is(err, sandbox.ErrEscape) || errors.Is(err, sandbox.ErrInvalid) || errors.Is(err, sandbox.ErrTooLarge) {
		return raise(excOSError, "%s", err.Error())
	}
	return err
}

func (s *Server) rexReadFile(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexReadFileResponse, error) {
	var req rexReadFileRequest
	if err := readRexBody(r, &req); err != nil {
		return nil, err
	}
	abs := rexPath(sb, req.Path)
	b, err := sb.ReadFile(r.Context(), abs, 0)
	if err != nil {
		return nil, osError(r.Context(), sb, abs, req.Path, err)
	}
	text, err := pyDecode(b, req.Encoding, req.Errors)
	if err != nil {
		return nil, err
	}
	// read_text opens in text mode: universal newlines.
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	return &rexReadFileResponse{Content: text}, nil
}

func (s *Server) rexWriteFile(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexEmptyResponse, error) {
	var req rexWriteFileRequest
	if err := readRexBody(r, &req); err != nil {
		return nil, err
	}
	abs := rexPath(sb, req.Path)
	if err := sb.WriteFile(r.Context(), abs, []byte(req.Content), 0o644); err != nil {
		return nil, osError(r.Context(), sb, abs, req.Path, err)
	}
	return &rexEmptyResponse{}, nil
}

func (s *Server) rexUpload(r *http.Request, sb *engine.Sandbox, x *rexSandbox) (*rexEmptyResponse, error) {
	form, err := readUploadForm(r)
	if err != nil {
		return nil, err
	}
	target, data := form.TargetPath, form.File
	abs := rexPath(sb, target)
	if form.Unzip {
		tarball, err := zipToTar(data)
		if err != nil {
			return nil, raise("zipfile.BadZipFile", "%s", err.Error())
		}
		if err := sb.PutTar(r.Context(), abs, tarball); err != nil {
			return nil, osError(r.Context(), sb, abs, target, err)
		}
		return &rexEmptyResponse{}, nil
	}
	// shutil.move into an existing directory keeps the upload's file name.
	if fe, err := sb.Stat(r.Context(), abs); err == nil && fe.Type == "dir" {
		abs = path.Join(abs, "temp_file_transfer")
	}
	if err := sb.WriteFile(r.Context(), abs, data, 0o644); err != nil {
		return nil, osError(r.Context(), sb, abs, target, err)
	}
	return &rexEmptyResponse{}, nil
}

// zipToTar repacks a zip as zipfile.extractall writes it: regular files
// 0644 and directories 0755 (extractall keeps no modes and makes no
// links), names made relative, ".." dropped.
func zipToTar(data []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range zr.File {
		var parts []string
		for _, p := range strings.Split(strings.ReplaceAll(f.Name, "\\", "/"), "/") {
			if p != "" && p != "." && p != ".." {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			continue
		}
		name := strings.Join(parts, "/")
		if strings.HasSuffix(f.Name, "/") {
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: f.Modified}); err != nil {
				return nil, err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: f.Modified}); err != nil {
			return nil, err
		}
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rexBody reads a JSON object body as pydantic would see it.
func rexBody(r *http.Request) (map[string]any, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &validationError{[]rexValidationError{{Type: "missing", Loc: rexLoc{"body"}, Msg: "Field required"}}}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, &validationError{[]rexValidationError{{Type: "json_invalid", Loc: rexLoc{"body", 0}, Msg: "JSON decode error",
			Input: map[string]any{}, Ctx: map[string]any{"error": "Expecting value"}}}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &validationError{[]rexValidationError{{Type: "model_attributes_type", Loc: rexLoc{"body"},
			Msg: "Input should be a valid dictionary or object to extract fields from", Input: v}}}
	}
	return m, nil
}

// pyRepr is Python's repr() of a str.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func pyList(l []string) string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = pyRepr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pyFloat is Python's str() of a float.
func pyFloat(f float64) string {
	s := fmt.Sprintf("%v", f)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}

// pyDecode decodes b as Path.read_text(encoding, errors) would.
func pyDecode(b []byte, enc, errs *string) (string, error) {
	e := "utf-8"
	if enc != nil {
		e = strings.ToLower(strings.ReplaceAll(*enc, "_", "-"))
	}
	mode := "strict"
	if errs != nil {
		mode = *errs
	}
	switch e {
	case "utf-8", "utf8", "u8":
	case "latin-1", "latin1", "iso-8859-1", "iso8859-1", "l1":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r), nil
	case "ascii", "us-ascii":
		for i, c := range b {
			if c >= 0x80 && mode == "strict" {
				return "", raise(excUnicode, "'ascii' codec can't decode byte 0x%02x in position %d: ordinal not in range(128)", c, i)
			}
		}
		if mode == "strict" {
			return string(b), nil
		}
	default:
		return "", raise(excLookup, "unknown encoding: %s", *enc)
	}
	if utf8.Valid(b) {
		return string(b), nil
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			out.WriteRune(r)
			i += n
			continue
		}
		switch mode {
		case "strict":
			return "", raise(excUnicode, "'utf-8' codec can't decode byte 0x%02x in position %d: invalid start byte", b[i], i)
		case "ignore":
		case "backslashreplace":
			fmt.Fprintf(&out, `\x%02x`, b[i])
		default: // replace, surrogateescape (not representable in JSON)
			out.WriteRune(utf8.RuneError)
		}
		i++
	}
	return out.String(), nil
}

func pyBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "y", "on", "t":
		return true, true
	case "false", "0", "no", "n", "off", "f":
		return false, true
	}
	return false, false
}
