package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Adopting a shell. A bash that has run no command differs from another
// started with other options only in what it imported from its
// environment at its start and in its working directory: Adopt sets
// those as the other start would have, so a session started ahead (a
// fork's spare's, kept across the reset of its root) serves a session
// with its own cwd and variables without a shell's start on the path.

// ErrNotAdoptable means Adopt cannot make the session's shell the same
// as a new one with the options asked; the session is unchanged (start
// a new one instead).
var ErrNotAdoptable = errors.New("the shell cannot be adopted")

// ShellState says whether the session's shell has run no command, and,
// if so, its pid and the names (in the session's ChanDir) of the named
// pipes its commands open: what a sandbox's reset keeps of it when it
// keeps the shell across a new root.
func (s *Session) ShellState() (pid int, chans []string, unused bool) {
	if s.used.Load() || !s.Alive() {
		return 0, nil, false
	}
	return s.shell.pid, []string{baseName(s.stdinPath), baseName(s.statusPath)}, true
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// Adopt makes the session's shell, which has run no command, the shell
// Start with opts would have started: its exported variables opts.Env's
// as a new bash imports them (SHLVL one up, PWD and OLDPWD as bash sets
// them at its start) and its working directory opts.Dir. It fails with
// ErrNotAdoptable, the session unchanged, where the two could differ: a
// command ran in it, another shell or pipe dir, or a variable whose
// value or presence differs that bash reads at its start or treats
// specially when set (startVar: LANG, SHELLOPTS, HISTFILE, PS1, ...).
// Any other error leaves the shell half changed: close the session.
// Its name stays (Rename).
func (s *Session) Adopt(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Gate.Enter() // with s.mu held, as Exec
	defer s.opts.Gate.Leave()
	switch {
	case s.used.Load() || s.closed || s.ended || s.active != nil || !s.Alive():
		return fmt.Errorf("session %q: %w: it ran a command or ended", s.name, ErrNotAdoptable)
	case opts.Shell != s.opts.Shell || opts.ChanDir != s.opts.ChanDir:
		return fmt.Errorf("session %q: %w: another shell or pipe dir", s.name, ErrNotAdoptable)
	}
	dir := opts.Dir
	if dir == "" {
		wd, err := os.Getwd() // the caller's, as Start's
		if err != nil {
			return fmt.Errorf("session %q: %w: %v", s.name, ErrNotAdoptable, err)
		}
		dir = wd
	}
	line, err := adoptLine(startEnv(s.opts, s.marker), startEnv(opts, s.marker))
	if err != nil {
		return fmt.Errorf("session %q: %w", s.name, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, setupTimeout)
		defer cancel()
	}
	s.settleIdle()
	res, err := s.exec(ctx, ExecRequest{Command: "builtin cd -- " + quote(dir) + " && { " + line + "; }"}, "", nil)
	switch {
	case err != nil:
		return err
	case res.SessionEnded || res.TimedOut:
		return fmt.Errorf("session %q: the shell did not take its new state", s.name)
	case res.ExitCode != 0:
		return fmt.Errorf("session %q: working directory %s: %s", s.name, dir, strings.TrimSpace(res.Output))
	}
	s.lastStatus = 0
	marker := s.marker
	s.opts = opts
	s.marker = marker
	return nil
}

// startEnv is the environment Start gives the shell of opts, its names
// to their values; an entry without "=" is kept under "=" and itself.
func startEnv(opts Options, marker string) map[string]string {
	cmd := exec.Command(opts.Shell)
	cmd.Env = append(shellEnv(opts.Env, marker), "HISTFILE=")
	cmd.Dir = opts.Dir
	env := map[string]string{}
	for _, kv := range cmd.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			k, v = "="+kv, ""
		}
		env[k] = v
	}
	return env
}

// adoptLine is the bash that turns a shell started with environment from
// into one started with to, run once it is in its new working directory;
// ErrNotAdoptable when no line can.
func adoptLine(from, to map[string]string) (string, error) {
	var unset, set []string
	for _, k := range slices.Sorted(keysOf(from, to)) {
		old, had := from[k]
		v, has := to[k]
		if (had == has && old == v) || k == "SHLVL" || k == "PWD" || k == "OLDPWD" {
			continue
		}
		if !shellName(k) || startVar(k) || (had != has && defaultedVar(k)) {
			return "", fmt.Errorf("%w: variable %q would differ", ErrNotAdoptable, strings.TrimPrefix(k, "="))
		}
		if has {
			set = append(set, k+"="+quote(v))
		} else {
			unset = append(unset, k)
		}
	}
	// bash raises SHLVL by one at its start (0 when missing or not a
	// number).
	level := 0
	if v, ok := to["SHLVL"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= 999 || strconv.Itoa(n) != v {
			return "", fmt.Errorf("%w: SHLVL %q", ErrNotAdoptable, v)
		}
		level = n
	}
	set = append(set, "SHLVL="+strconv.Itoa(level+1))
	var b strings.Builder
	if len(unset) > 0 {
		b.WriteString("builtin unset -v " + strings.Join(unset, " ") + "; ")
	}
	b.WriteString("builtin export " + strings.Join(set, " ") + "; ")
	// bash keeps an imported PWD naming the working directory, else
	// takes the directory's physical path; an imported OLDPWD that is a
	// directory, else OLDPWD is exported without a value.
	if p, ok := to["PWD"]; ok && strings.HasPrefix(p, "/") {
		fmt.Fprintf(&b, "if [[ %[1]s -ef . ]]; then PWD=%[1]s; else builtin cd -P .; fi; ", quote(p))
	} else {
		b.WriteString("builtin cd -P .; ")
	}
	b.WriteString("builtin export PWD; builtin unset -v OLDPWD; ")
	if o, ok := to["OLDPWD"]; ok {
		fmt.Fprintf(&b, "if [[ -d %[1]s ]]; then OLDPWD=%[1]s; fi; ", quote(o))
	}
	b.WriteString("builtin export OLDPWD")
	return b.String(), nil
}

// quote is s as one bash word (ANSI-C quoted).
func quote(s string) string {
	var b strings.Builder
	ansiCQuote(&b, s)
	return b.String()
}

func keysOf(ms ...map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// shellName reports whether k is a name bash takes for a variable.
func shellName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// startVar reports whether k is a variable a shell and an adopted one
// must agree on: bash reads it at its start only, sets it itself, or
// acts when one is set (locale, options, history, prompts and what the
// session's setup line unsets), or it is MarkerEnv, the session's own.
// (A switch, not a map: no heap in every process that links this
// package, such as each sandbox's supervisor.)
func startVar(k string) bool {
	switch k {
	case "SHELLOPTS", "POSIXLY_CORRECT", "ENV", "LANG", "LANGUAGE", "TZ", "TEXTDOMAIN", "TEXTDOMAINDIR",
		"HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "HISTIGNORE", "HISTTIMEFORMAT", "histchars", "HOSTFILE",
		"TMOUT", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS4", "IFS", "IGNOREEOF", "INPUTRC", "TERM", "TERMCAP",
		"TERMINFO", "EMACS", "INSIDE_EMACS", "COLUMNS", "LINES", "MAIL", "MAILCHECK", "MAILPATH", "OPTERR", "OPTIND",
		"FUNCNEST", "GLOBIGNORE", "EXECIGNORE", "CHILD_MAX", "auto_resume", "HOSTNAME", "HOSTTYPE", "OSTYPE",
		"MACHTYPE", "UID", "EUID", "PPID", "GROUPS", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "HISTCMD", "DIRSTACK",
		"FUNCNAME", "EPOCHSECONDS", "EPOCHREALTIME", "_", MarkerEnv:
		return true
	}
	return strings.HasPrefix(k, "BASH") || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "COMP_")
}

// defaultedVar reports whether bash gives k a value of its own when its
// environment lacks it: a shell and an adopted one must both have it or
// both not, whatever its values.
func defaultedVar(k string) bool { return k == "HOME" || k == "SHELL" || k == "PATH" }
