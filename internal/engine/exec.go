package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// A one-shot command runs in a fresh `bash -c`, which gets the command as
// an argument; Linux caps one argument at 128 KiB (MAX_ARG_STRLEN). Longer
// commands, and stdin, travel as files in scratchDir that the command
// itself removes once it has read them, so a command of any size up to the
// wire's frame runs unchanged.
const (
	scratchDir = "/tmp/.msb-exec"
	maxArgText = 100 << 10
)

// Exec runs a command: in the named session, or in a fresh bash (with the
// request's cwd, env and stdin).
func (s *Sandbox) Exec(ctx context.Context, req api.ExecRequest) (api.ExecResult, error) {
	defer s.use()()
	if err := checkExec(req); err != nil {
		return api.ExecResult{}, err
	}
	r := session.ExecRequest{Command: req.Command, Timeout: time.Duration(req.TimeoutNs), SeparateStderr: req.SeparateStderr, MaxOutput: req.MaxOutput,
		Interactive: req.Interactive, Input: req.Input, Interrupt: req.Interrupt, Expect: req.Expect}
	if req.Session != "" {
		if req.Cwd != "" || len(req.Env) > 0 || req.Stdin != "" {
			return api.ExecResult{}, fmt.Errorf("%w: cwd, env and stdin are for a fresh bash; a session keeps its own directory and variables", ErrBadRequest)
		}
		res, err := s.sbox().SessionExec(ctx, req.Session, r)
		if res.SessionEnded || errors.Is(err, session.ErrSessionEnded) {
			s.mu.Lock()
			delete(s.sessions, req.Session)
			s.mu.Unlock()
		}
		if err != nil {
			return api.ExecResult{}, err
		}
		return execResult(res), nil
	}
	s.dropStandby(ctx)
	script, err := s.prepare(ctx, req, "")
	if err != nil {
		return api.ExecResult{}, err
	}
	r.Command = script
	res, err := s.sbox().Exec(ctx, r)
	if err != nil {
		return api.ExecResult{}, err
	}
	return execResult(res), nil
}

func checkExec(req api.ExecRequest) error {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return fmt.Errorf("%w: the command contains a NUL byte, which bash cannot run", ErrBadRequest)
	}
	if req.TimeoutNs < 0 || req.MaxOutput < 0 {
		return fmt.Errorf("%w: negative timeout_ns or max_output", ErrBadRequest)
	}
	if req.Session == "" && (req.Interactive || req.Input || req.Interrupt || len(req.Expect) > 0) {
		return fmt.Errorf("%w: interactive, input, interrupt and expect are for a session's command", ErrBadRequest)
	}
	return nil
}

func execResult(res session.Result) api.ExecResult {
	return api.ExecResult{Stdout: res.Output, Stderr: res.Stderr, ExitCode: res.ExitCode, DurationNs: int64(res.Duration),
		Truncated: res.Truncated, TimedOut: res.TimedOut, SessionEnded: res.SessionEnded, Running: res.Running, Matched: res.Matched}
}

// prepare turns a one-shot request into the script the fresh bash runs:
// a prologue (output files for streaming, cwd, env, stdin) and the
// command, or a line that reads the command from a scratch file. redirect
// is a redirection for the whole script ("" for none).
func (s *Sandbox) prepare(ctx context.Context, req api.ExecRequest, redirect string) (string, error) {
	if err := checkEnv(req.Env); err != nil {
		return "", err
	}
	if req.Cwd != "" && !path.IsAbs(req.Cwd) {
		return "", fmt.Errorf("%w: cwd %q is not an absolute path", ErrBadRequest, req.Cwd)
	}
	var pro strings.Builder
	if redirect != "" {
		pro.WriteString("exec " + redirect + "\n")
	}
	if req.Cwd != "" {
		pro.WriteString("cd -- " + shellQuote(req.Cwd) + " || exit 1\n")
	}
	for _, kv := range req.Env {
		pro.WriteString("export " + shellQuote(kv) + "\n")
	}
	if req.Stdin != "" {
		f, err := s.scratch(ctx, "in", []byte(req.Stdin))
		if err != nil {
			return "", err
		}
		pro.WriteString("exec 0<" + shellQuote(f) + " && rm -f -- " + shellQuote(f) + "\n")
	}
	if pro.Len()+len(req.Command) <= maxArgText {
		return pro.String() + req.Command, nil
	}
	f, err := s.scratch(ctx, "sh", []byte(req.Command))
	if err != nil {
		return "", err
	}
	q := shellQuote(f)
	return pro.String() + "__msb_cmd=$(<" + q + "); rm -f -- " + q + "; eval \"unset __msb_cmd; $__msb_cmd\"", nil
}

// scratch writes data to a new file in the sandbox's scratch directory.
func (s *Sandbox) scratch(ctx context.Context, ext string, data []byte) (string, error) {
	f := scratchDir + "/" + randomHex(8) + "." + ext
	if err := s.sbox().WriteFile(ctx, f, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the command's %s file: %w", ext, err)
	}
	return f, nil
}

func checkEnv(env []string) error {
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !isName(name) {
			return fmt.Errorf("%w: environment entry %q is not NAME=value with NAME a shell variable name", ErrBadRequest, kv)
		}
	}
	return nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ExecStream runs a one-shot command like Exec and hands its output to
// emit as the sandbox reads it (api.EventStdout and EventStderr events),
// then returns the result, whose output holds everything again, capped as
// Exec caps it (Truncated past MaxOutput). Output is relayed with
// back-pressure: while emit blocks (a slow client), the command waits in
// its writes, so neither the sandbox nor the daemon buffers more than a
// few reads of it, however much it prints. emit is called from this
// goroutine only.
func (s *Sandbox) ExecStream(ctx context.Context, req api.ExecRequest, emit func(api.ExecEvent)) (api.ExecResult, error) {
	var out, errOut utf8Splitter
	res, err := s.ExecStreamBytes(ctx, req, func(stderr bool, p []byte) {
		sp, event := &out, api.EventStdout
		if stderr {
			sp, event = &errOut, api.EventStderr
		}
		if data := sp.next(p); data != "" {
			emit(api.ExecEvent{Type: event, Data: data})
		}
	})
	if err != nil {
		return api.ExecResult{}, err
	}
	if data := out.rest(); data != "" {
		emit(api.ExecEvent{Type: api.EventStdout, Data: data})
	}
	if data := errOut.rest(); data != "" {
		emit(api.ExecEvent{Type: api.EventStderr, Data: data})
	}
	return res, nil
}

// ExecStreamBytes is ExecStream with the output as the command wrote it,
// for a front end whose wire carries bytes (E2B's process stream): emit
// gets each read of stdout or stderr, neither made valid UTF-8 nor cut at
// a character's boundary; p is reused after emit returns. The result's
// output is Exec's (valid UTF-8, other bytes as \xNN).
func (s *Sandbox) ExecStreamBytes(ctx context.Context, req api.ExecRequest, emit func(stderr bool, p []byte)) (api.ExecResult, error) {
	return s.ExecStreamKeyed(ctx, "", req, emit)
}

// ExecStreamKeyed is ExecStreamBytes under key, the caller's name for the
// command: should a snapshot with processes (SnapshotProcesses, or a fork
// with them) dump it while it runs, the sandboxes restored from the dump
// list it by key (RestoredExecs) and AttachExec goes on reading it.
func (s *Sandbox) ExecStreamKeyed(ctx context.Context, key string, req api.ExecRequest, emit func(stderr bool, p []byte)) (api.ExecResult, error) {
	defer s.use()()
	if req.Session != "" {
		return api.ExecResult{}, fmt.Errorf("%w: streaming is for one-shot commands; a session's command returns its output at the end", ErrBadRequest)
	}
	if err := checkExec(req); err != nil {
		return api.ExecResult{}, err
	}
	s.dropStandby(ctx)
	script, err := s.prepare(ctx, req, "")
	if err != nil {
		return api.ExecResult{}, err
	}
	res, err := s.sbox().ExecStreamKeyed(ctx, key, session.ExecRequest{Command: script, Timeout: time.Duration(req.TimeoutNs),
		SeparateStderr: req.SeparateStderr, MaxOutput: req.MaxOutput}, emit)
	if err != nil {
		return api.ExecResult{}, err
	}
	return execResult(res), nil
}

// RestoredExec is a command a restored sandbox runs on: its key and the
// output its sandbox had sent when it was dumped (sandbox.RestoredExec).
type RestoredExec = sandbox.RestoredExec

// RestoredExecs are the commands started with a key (ExecStreamKeyed)
// that a sandbox restored with its processes (a fork with processes
// "all") had running when they were dumped and that run on in it, not yet
// attached (AttachExec); none for any other sandbox.
func (s *Sandbox) RestoredExecs() []RestoredExec { return s.sbox().RestoredExecs() }

// KeyedExecs are the keys of the commands started with a key
// (ExecStreamKeyed) that the sandbox runs now and a dump of its
// processes taken now would carry (sandbox.Sandbox.KeyedExecs): one
// whose ExecStreamKeyed has not yet reached the sandbox is not listed.
func (s *Sandbox) KeyedExecs(ctx context.Context) ([]string, error) {
	return s.sbox().KeyedExecs(ctx)
}

// AttachExec goes on reading the restored command key (RestoredExecs) as
// ExecStreamKeyed would have: emit gets its output from offset from on
// (what the caller lacks of it: it read the output before from the
// sandbox that was dumped; from is at most the command's Sent), then its
// result is returned; an end of ctx interrupts it. A key not restored, or
// attached already, is ErrNotFound.
func (s *Sandbox) AttachExec(ctx context.Context, key string, from int64, emit func(stderr bool, p []byte)) (api.ExecResult, error) {
	defer s.use()()
	res, err := s.sbox().AttachExec(ctx, key, from, emit)
	if errors.Is(err, sandbox.ErrNotFound) {
		return api.ExecResult{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return api.ExecResult{}, err
	}
	return execResult(res), nil
}

// utf8Splitter cuts a stream of output into events that never split a
// UTF-8 sequence: an incomplete one at the end of a read waits for the next.
type utf8Splitter struct{ pending []byte }

func (u *utf8Splitter) next(p []byte) string {
	data := append(u.pending, p...)
	cut := len(trimPartialEnd(data))
	u.pending = append(u.pending[:0:0], data[cut:]...)
	return sanitize(data[:cut])
}

// rest is what the last read left pending.
func (u *utf8Splitter) rest() string {
	s := sanitize(u.pending)
	u.pending = nil
	return s
}

// trimPartialEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialEnd(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// sanitize makes b valid UTF-8 without NUL as the session package does:
// other bytes become the four characters \xNN.
func sanitize(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsRune(string(b), 0) {
		return string(b)
	}
	const digits = "0123456789abcdef"
	var out strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 || r == 0 {
			out.WriteString(`\x`)
			out.WriteByte(digits[b[0]>>4])
			out.WriteByte(digits[b[0]&0xf])
		} else {
			out.Write(b[:n])
		}
		b = b[n:]
	}
	return out.String()
}
