package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/api"
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
		res, err := s.sb.SessionExec(ctx, req.Session, r)
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
	res, err := s.sb.Exec(ctx, r)
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
	if err := s.sb.WriteFile(ctx, f, data, 0o600); err != nil {
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

// StreamEvery is how often a streaming exec looks for new output.
const StreamEvery = 50 * time.Millisecond

// ExecStream runs a one-shot command like Exec and hands its output to
// emit as it comes (api.EventStdout and EventStderr events, at most every
// StreamEvery), then returns the result, whose output holds everything
// again, capped as Exec caps it. The command's output goes to scratch
// files inside the sandbox while it runs (they count against its /tmp),
// removed at the end. emit is called from this goroutine only.
func (s *Sandbox) ExecStream(ctx context.Context, req api.ExecRequest, emit func(api.ExecEvent)) (api.ExecResult, error) {
	defer s.use()()
	if req.Session != "" {
		return api.ExecResult{}, fmt.Errorf("%w: streaming is for one-shot commands; a session's command returns its output at the end", ErrBadRequest)
	}
	if err := checkExec(req); err != nil {
		return api.ExecResult{}, err
	}
	s.dropStandby(ctx)
	base := scratchDir + "/" + randomHex(8)
	streams := []*outStream{{file: base + ".out", event: api.EventStdout}}
	redirect := "1>" + shellQuote(streams[0].file) + " 2>&1"
	if req.SeparateStderr {
		streams = append(streams, &outStream{file: base + ".err", event: api.EventStderr})
		redirect = "1>" + shellQuote(streams[0].file) + " 2>" + shellQuote(streams[1].file)
	}
	// The files exist (empty) before the command starts, so a poll never
	// mistakes "not yet created" for an error.
	for _, st := range streams {
		if err := s.sb.WriteFile(ctx, st.file, nil, 0o600); err != nil {
			return api.ExecResult{}, fmt.Errorf("creating the output file: %w", err)
		}
	}
	defer s.sb.Exec(context.WithoutCancel(ctx), session.ExecRequest{Command: "rm -f -- " + shellQuote(base) + ".*", Timeout: 10 * time.Second})
	script, err := s.prepare(ctx, req, redirect)
	if err != nil {
		return api.ExecResult{}, err
	}
	type outcome struct {
		res session.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.sb.Exec(ctx, session.ExecRequest{Command: script, Timeout: time.Duration(req.TimeoutNs)})
		done <- outcome{res, err}
	}()
	max := req.MaxOutput
	if max <= 0 {
		max = session.DefaultMaxOutput
	}
	for _, st := range streams {
		st.buf = newTailCap(max)
	}
	tick := time.NewTicker(StreamEvery)
	defer tick.Stop()
	var end outcome
	for finished := false; !finished; {
		select {
		case end = <-done:
			finished = true
		case <-tick.C:
		}
		for _, st := range streams {
			if err := s.drain(ctx, st, emit, finished); err != nil && end.err == nil {
				end.err = err
			}
		}
	}
	if end.err != nil {
		return api.ExecResult{}, end.err
	}
	res := execResult(end.res)
	res.Stdout, res.Truncated = streams[0].buf.String(), streams[0].buf.truncated()
	if len(streams) > 1 {
		res.Stderr = streams[1].buf.String()
		res.Truncated = res.Truncated || streams[1].buf.truncated()
	}
	return res, nil
}

// outStream is one output file of a streaming exec and how far it was read.
type outStream struct {
	file    string
	event   string
	off     int64
	pending []byte // an incomplete UTF-8 sequence at the end of the last read
	buf     *tailCap
}

// streamChunk bounds the bytes read from an output file per round trip.
const streamChunk = 4 << 20

// drain reads what st's file gained since the last read and emits it; with
// all, until the end of the file.
func (s *Sandbox) drain(ctx context.Context, st *outStream, emit func(api.ExecEvent), all bool) error {
	for {
		cmd := fmt.Sprintf("tail -c +%d -- %s 2>/dev/null | head -c %d | base64 -w0", st.off+1, shellQuote(st.file), streamChunk)
		res, err := s.sb.Exec(ctx, session.ExecRequest{Command: cmd, Timeout: time.Minute, MaxOutput: streamChunk*4/3 + 16})
		if err != nil {
			return fmt.Errorf("reading the command's output: %w", err)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(res.Output))
		if err != nil {
			return fmt.Errorf("reading the command's output: %w", err)
		}
		st.off += int64(len(b))
		st.buf.write(b)
		data := append(st.pending, b...)
		cut := len(data)
		for i := 1; i < utf8.UTFMax && i <= len(data); i++ {
			if utf8.RuneStart(data[len(data)-i]) {
				if !utf8.FullRune(data[len(data)-i:]) && !all {
					cut = len(data) - i
				}
				break
			}
		}
		st.pending = append([]byte(nil), data[cut:]...)
		if cut > 0 {
			emit(api.ExecEvent{Type: st.event, Data: sanitize(data[:cut])})
		}
		if !all || len(b) < streamChunk {
			return nil
		}
	}
}

// tailCap keeps the first and last halves of what is written past max
// bytes, as the session package caps output.
type tailCap struct {
	max   int
	head  []byte
	tail  []byte
	total int64
}

func newTailCap(max int) *tailCap { return &tailCap{max: max} }

func (c *tailCap) write(b []byte) {
	c.total += int64(len(b))
	if room := c.max - c.max/2 - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	c.tail = append(c.tail, b...)
	if keep := c.max / 2; len(c.tail) > keep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

func (c *tailCap) truncated() bool { return c.total > int64(len(c.head)+len(c.tail)) }

func (c *tailCap) String() string {
	if !c.truncated() {
		return sanitize(append(append([]byte(nil), c.head...), c.tail...))
	}
	head, tail := trimPartialEnd(c.head), c.tail
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	dropped := c.total - int64(len(head)) - int64(len(tail))
	return sanitize(head) + "\n[... " + strconv.FormatInt(dropped, 10) + " bytes of output omitted ...]\n" + sanitize(tail)
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
