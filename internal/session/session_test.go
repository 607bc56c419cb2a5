package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/minisandbox/msb/internal/privtest"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// testGrace keeps interrupted commands short; nothing asserts wall time.
const testGrace = 200 * time.Millisecond

func TestMain(m *testing.M) {
	// Every process this binary starts stays its descendant, orphans
	// included (they are re-parented here), so the leak check below can
	// tell its own from other test binaries' sessions on the same host.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: PR_SET_CHILD_SUBREAPER: %v\n", err)
		os.Exit(1)
	}
	fdsBefore, goroutinesBefore := countFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		// Orphan drainers end when Close returns; allow the scheduler a moment.
		for i := 0; i < 100 && runtime.NumGoroutine() > goroutinesBefore; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutinesBefore {
			fmt.Fprintf(os.Stderr, "FAIL: %d goroutines before the tests, %d after\n", goroutinesBefore, n)
			code = 1
		}
		if leaked := leakedProcesses(); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: processes of sessions still alive after the tests: %v\n", leaked)
			code = 1
		}
		// The runtime may open a few descriptors of its own (epoll, ...).
		if after := countFDs(); after > fdsBefore+4 {
			fmt.Fprintf(os.Stderr, "FAIL: %d file descriptors open before the tests, %d after\n", fdsBefore, after)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedProcesses lists this binary's live descendants that carry a
// session's marker (other test binaries' sessions are not its leaks).
func leakedProcesses() []string {
	var out []string
	forEachPID(func(pid int) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !bytes.Contains(env, []byte(MarkerEnv+"=")) || !descendant(pid) {
			return
		}
		if st, ok := readStat(pid); ok && alive(st) {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			out = append(out, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	})
	return out
}

// descendant: pid's parent chain reaches this process.
func descendant(pid int) bool {
	self := os.Getpid()
	for pid > 1 {
		st, ok := readStat(pid)
		if !ok {
			return false
		}
		if st.ppid == self {
			return true
		}
		pid = st.ppid
	}
	return false
}

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

func startSession(t testing.TB, opts Options) *Session {
	t.Helper()
	if opts.KillGrace == 0 {
		opts.KillGrace = testGrace
	}
	s, err := Start(context.Background(), t.Name(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustExec(t testing.TB, s *Session, req ExecRequest) Result {
	t.Helper()
	res, err := s.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v (result %+v)", req.Command, err, res)
	}
	return res
}

func sh(t testing.TB, s *Session, command string) Result {
	t.Helper()
	return mustExec(t, s, ExecRequest{Command: command})
}

// expectOutput runs command and checks its merged output and exit code.
func expectOutput(t testing.TB, s *Session, command, want string, code int) {
	t.Helper()
	res := sh(t, s, command)
	if res.Output != want || res.ExitCode != code || res.TimedOut || res.SessionEnded {
		t.Fatalf("Exec(%q) = %+v, want output %q, exit code %d", command, res, want, code)
	}
}

// waitGone waits for pid to be dead (or a zombie), failing after a while.
func waitGone(t testing.TB, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if st, ok := readStat(pid); !ok || !alive(st) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d still alive", pid)
}

func isAlive(pid int) bool {
	st, ok := readStat(pid)
	return ok && alive(st)
}

func TestStatePersists(t *testing.T) {
	s := startSession(t, Options{Dir: t.TempDir()})
	dir := t.TempDir()
	tests := []struct {
		name, set, check, want string
	}{
		{"cwd", "cd " + dir, "pwd", dir + "\n"},
		{"exported variable", "export FOO='a b'", `echo "$FOO"; printenv FOO`, "a b\na b\n"},
		{"shell variable", "bar=42", "echo $bar", "42\n"},
		{"function", "greet() { echo hi \"$1\"; }", "greet you", "hi you\n"},
		{"alias", "alias ll='echo aliased'", "ll", "aliased\n"},
		{"option", "set -o noglob", "echo *", "*\n"},
		{"exit status", "false", "echo $?", "1\n"},
		{"exit status after syntax error", "if then", "echo $?", "2\n"},
		{"array", "declare -a arr=(x y z)", "echo ${arr[1]} ${#arr[@]}", "y 3\n"},
		{"umask", "umask 077", "umask", "0077\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh(t, s, tt.set)
			expectOutput(t, s, tt.check, tt.want, 0)
		})
	}
}

// TestFramingCannotBeConfused runs commands that print or change what a
// weaker framing would rely on, and checks that each result is exactly the
// command's own and that the session keeps working and keeps its state.
func TestFramingCannotBeConfused(t *testing.T) {
	s := startSession(t, Options{})
	sh(t, s, "canary=alive")
	fakeNonce := strings.Repeat("0", nonceLen)
	// Entries whose effect lasts (set -x, aliases, traps) are followed by
	// one that shows the effect and undoes it; the canary check after
	// every entry shows the session still works and kept its state.
	tests := []struct {
		name, command, want string
		code                int
	}{
		{"PS1", `PS1='$(echo PS1-RAN) fake> '; echo x`, "x\n", 0},
		{"PS2", `PS2='> DONE 0'; echo y`, "y\n", 0},
		{"PROMPT_COMMAND", `PROMPT_COMMAND='echo PC-RAN; echo ` + fakeNonce + ` 0'; echo z`, "z\n", 0},
		{"fake status line", `echo "` + fakeNonce + ` 0"; printf '%s 0\n' "` + fakeNonce + `" >&2; exit_code_is=3; (exit 3)`, fakeNonce + " 0\n" + fakeNonce + " 0\n", 3},
		{"fake frame text", `echo "\builtin printf '%s %d\n' 0 >|/proc/1/fd/1"`, `\builtin printf '%s %d\n' 0 >|/proc/1/fd/1` + "\n", 0},
		{"exec stdout to null", "exec >/dev/null; echo hidden", "", 0},
		{"exec 2>&1", "exec 2>&1; echo out; echo err >&2", "out\nerr\n", 0},
		{"close stdin", "exec 0<&-; echo closed", "closed\n", 0},
		{"close stdout and stderr", "exec 1>&- 2>&-; echo gone", "", 1},
		{"close low fds", "for fd in 3 4 5 6 7 8 9; do eval \"exec $fd>&-\"; done; echo ok", "ok\n", 0},
		{"noclobber", "set -o noclobber; echo ok", "ok\n", 0},
		{"nounset", "set -u; echo ok", "ok\n", 0},
		// eval adds a level of indirection: PS4 is doubled.
		{"xtrace", "set -x; echo traced; set +x", "++ echo traced\ntraced\n++ set +x\n", 0},
		{"xtrace persists", "set -x\necho traced; set +x", "++ echo traced\ntraced\n++ set +x\n", 0},
		// set -v echoes input lines: the command's, never the frame.
		{"verbose", "set -v\necho v; set +v", "echo v; set +v\nv\n", 0},
		{"IFS", "IFS=0123456789; echo ok", "ok\n", 0},
		// Aliases apply from the next line of input on.
		{"aliases named like framing words", "alias builtin='echo ALIAS' eval='echo ALIAS' printf='echo ALIAS' '{'='echo ALIAS'\nprintf ok\nunalias builtin eval printf '{'", "ALIAS ok\n", 0},
		{"functions named like framing words", "function printf { echo FN; }; function eval { echo FN; }\nprintf x; eval y; unset -f printf eval", "FN\nFN\n", 0},
		{"DEBUG trap", "trap 'echo DEBUG-TRAP' DEBUG\necho ok; trap - DEBUG", "DEBUG-TRAP\nok\nDEBUG-TRAP\n", 0},
		{"ERR trap", "trap 'echo ERR-TRAP' ERR\nfalse; trap - ERR", "ERR-TRAP\n", 0},
		{"syntax error", "if then fi (", "bash: syntax error near unexpected token `then'\n", 2},
		{"unterminated quote", `echo "never closed`, "bash: unexpected EOF while looking for matching `\"'\n", 2},
		{"heredoc", "cat <<'EOF'\nline 1\n$not_expanded\nEOF", "line 1\n$not_expanded\n", 0},
		{"multi-line", "echo a\necho b\n\necho c", "a\nb\nc\n", 0},
		{"continue at top level", "continue; echo after", "bash: continue: only meaningful in a `for', `while', or `until' loop\nafter\n", 0},
		{"break at top level", "break 2>/dev/null; echo after", "after\n", 0},
		{"history expansion text", "echo 'a!b' \"!!\" !x", "a!b !! !x\n", 0},
		{"all bytes", `printf '%s' $'\x01\x02\x7f\x80\xff' | od -An -tx1 | tr -d ' \n'`, "01027f80ff", 0},
		{"return outside function", "return 4", "bash: return: can only `return' from a function or sourced script\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := sh(t, s, tt.command)
			if res.Output != tt.want || res.ExitCode != tt.code || res.SessionEnded || res.TimedOut {
				t.Errorf("got %+v, want output %q, exit code %d", res, tt.want, tt.code)
			}
			expectOutput(t, s, "echo $canary", "alive\n", 0)
		})
	}
}

// TestStateAcrossFrames sets state that every later frame runs under and
// checks that the next command is framed correctly and sees the state.
func TestStateAcrossFrames(t *testing.T) {
	s := startSession(t, Options{})
	tests := []struct {
		name, set, check, want, undo string
	}{
		{"xtrace", "set -x", "echo a", "++ echo a\na\n", "set +x"},
		{"verbose", "set -v", "echo a", "echo a\na\n", "set +v"},
		{"aliases", "alias builtin='echo ALIAS' eval='echo ALIAS' printf='echo ALIAS' '{'='echo ALIAS'", "printf a", "ALIAS a\n", "unalias builtin eval printf '{'"},
		{"functions", "function printf { echo FN; }; function eval { echo FN; }; function command { echo FN; }", "printf a", "FN\n", "unset -f printf eval command"},
		{"DEBUG trap", "trap 'echo DEBUG-TRAP' DEBUG", "echo a", "DEBUG-TRAP\na\n", "trap - DEBUG"},
		{"ERR trap and errtrace", "set -E; trap 'echo ERR-TRAP' ERR", "false", "ERR-TRAP\n", "trap - ERR; set +E"},
		{"nounset", "set -u", "echo a", "a\n", "set +u"},
		{"noclobber", "set -C", "echo a", "a\n", "set +C"},
		{"noexec of globs", "set -f", "echo *", "*\n", "set +f"},
		{"IFS", "IFS=0123456789", "echo a", "a\n", "unset IFS"},
		{"PATH", "PATH=/nonexistent", "echo a", "a\n", "PATH=/usr/bin:/bin"},
		{"posix mode", "set -o posix", "echo a", "a\n", "set +o posix"},
		{"history", "set -o history -o histexpand", "echo a", "a\n", "set +o history +o histexpand"},
		{"stdout redirected", "exec >/dev/null", "echo a", "a\n", ""},
		{"prompt", "PS1='$(echo X) ' PS0='Y' PROMPT_COMMAND='echo Z'", "echo a", "a\n", "unset PS1 PS0 PROMPT_COMMAND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh(t, s, tt.set)
			res := sh(t, s, tt.check)
			sh(t, s, tt.undo)
			if res.Output != tt.want {
				t.Errorf("after %q, %q printed %q, want %q", tt.set, tt.check, res.Output, tt.want)
			}
			expectOutput(t, s, "echo ok", "ok\n", 0)
		})
	}
}

func TestCommandWithNULIsRejected(t *testing.T) {
	s := startSession(t, Options{})
	_, err := s.Exec(context.Background(), ExecRequest{Command: "echo a\x00b"})
	if !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("got %v, want ErrInvalidCommand", err)
	}
	expectOutput(t, s, "echo ok", "ok\n", 0)
}

func TestSessionEnds(t *testing.T) {
	tests := []struct {
		name, command, output string
		code                  int
	}{
		{"exit", "exit 3", "exit\n", 3},
		{"exit zero", "exit", "exit\n", 0},
		{"exec program", "exec sh -c 'echo replaced; exit 7'", "replaced\n", 7},
		{"exec stdin reader times out", "exec cat", "", 130},
		{"set -e then failure", "set -e; echo before; false; echo after", "before\n", 1},
		{"set -e in earlier command", "set -e", "", -1},
		{"killed", "kill -KILL $$", "", 128 + 9},
		// Nothing interrupts it: the shell is killed after twice KillGrace.
		{"exec of a program that ignores SIGINT", `exec sh -c 'trap "" INT; while :; do sleep 1; done'`, "*", 128 + 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSession(t, Options{})
			sh(t, s, "echo warm")
			req := ExecRequest{Command: tt.command, Timeout: 300 * time.Millisecond}
			if tt.code == -1 { // set -e persists: the next failing command ends the shell
				sh(t, s, tt.command)
				req.Command, tt.code = "echo x; false", 1
				tt.output = "x\n"
			}
			res, err := s.Exec(context.Background(), req)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if !res.SessionEnded || res.ExitCode != tt.code || (res.Output != tt.output && tt.output != "*") {
				t.Errorf("got %+v, want SessionEnded, exit code %d, output %q", res, tt.code, tt.output)
			}
			if s.Alive() {
				t.Error("Alive() = true after the shell ended")
			}
			if _, err := s.Exec(context.Background(), ExecRequest{Command: "echo x"}); !errors.Is(err, ErrSessionEnded) {
				t.Errorf("Exec after end: err = %v, want ErrSessionEnded", err)
			}
			s2 := startSession(t, Options{})
			expectOutput(t, s2, "echo new", "new\n", 0)
		})
	}
}

func TestTimeout(t *testing.T) {
	s := startSession(t, Options{})
	sh(t, s, "kept=yes; cd /")
	tests := []struct {
		name, command string
	}{
		{"sleep", "sleep 100"},
		{"list after sleep does not run", "sleep 100; echo NOT-REACHED"},
		{"read builtin", "read x; echo NOT-REACHED"},
		{"cat", "cat; echo NOT-REACHED"},
		{"busy loop in shell", "while :; do :; done; echo NOT-REACHED"},
		{"loop of commands", "while :; do sleep 1; done"},
		{"pipeline", "yes | cat | sleep 100"},
		{"subshell", "(sleep 100; echo NOT-REACHED)"},
		{"own process group", "timeout 100 sleep 100; echo NOT-REACHED"},
		{"ignores SIGINT", "sh -c 'trap \"\" INT; sleep 100'"},
		{"stopped", "sleep 100 & kill -STOP $!; wait $!"},
		{"python repl", "python3 -i"},
		{"shell ignores SIGINT", "trap '' INT; sleep 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.HasPrefix(tt.command, "python3") {
				if _, err := exec.LookPath("python3"); err != nil {
					privtest.Skip(t, "python3 not installed")
				}
			}
			// Long enough for the command to be running (timeout to have
			// started sleep) when the interrupt comes, even on a loaded
			// machine: an interrupt before that is a different race.
			res := mustExec(t, s, ExecRequest{Command: tt.command, Timeout: 300 * time.Millisecond})
			if !res.TimedOut || res.SessionEnded || strings.Contains(res.Output, "NOT-REACHED") {
				t.Errorf("got %+v, want TimedOut without NOT-REACHED", res)
			}
			if res.ExitCode == 0 {
				t.Errorf("exit code 0 after a timeout: %+v", res)
			}
			sh(t, s, "trap - INT; kill -KILL $(jobs -p) 2>/dev/null; wait")
			expectOutput(t, s, "echo $kept; pwd", "yes\n/\n", 0)
		})
	}
}

// TestTimeoutBeforeCommandStarts: a PROMPT_COMMAND that sleeps delays the
// next frame past its deadline. The shell must not be interrupted while it
// reads or parses the frame; the session stays consistent either way.
func TestTimeoutBeforeCommandStarts(t *testing.T) {
	// The shell is killed 2*KillGrace after the deadline; the grace must
	// leave the 0.3 s PROMPT_COMMAND room to finish on a loaded machine, or
	// the test measures the machine's load rather than the framing.
	s := startSession(t, Options{KillGrace: 2 * time.Second})
	sh(t, s, "PROMPT_COMMAND='sleep 0.3'")
	for i := 0; i < 3; i++ {
		res, err := s.Exec(context.Background(), ExecRequest{Command: "echo hi", Timeout: 20 * time.Millisecond})
		if err != nil || res.SessionEnded || (res.Output != "hi\n" && res.Output != "") {
			t.Fatalf("got %+v, %v", res, err)
		}
	}
	sh(t, s, "unset PROMPT_COMMAND")
	expectOutput(t, s, "echo ok", "ok\n", 0)
}

func TestLargeCommand(t *testing.T) {
	s := startSession(t, Options{})
	// No single quotes: bash itself is quadratic on a word made of many
	// quoted pieces ('a'\''b').
	data := strings.Repeat("0123456789abcdef\"$!\\\n", 1<<16) // 1.4 MiB
	res := mustExec(t, s, ExecRequest{Command: "printf '%s' " + shellQuote(data) + " | wc -c"})
	if got := strings.TrimSpace(res.Output); got != strconv.Itoa(len(data)) {
		t.Errorf("wc -c printed %q, want %d", got, len(data))
	}
}

func TestTimeoutSparesEarlierBackgroundJobs(t *testing.T) {
	s := startSession(t, Options{})
	// Without children files, jobs younger than a clock tick (10 ms) count
	// as the new command's: wait 30 ms.
	sh(t, s, "sleep 1000 >/dev/null 2>&1 & bg=$!; sleep 0.03")
	pid, err := strconv.Atoi(strings.TrimSpace(sh(t, s, "echo $bg").Output))
	if err != nil {
		t.Fatal(err)
	}
	// Ignoring SIGINT, the command lasts until the SIGKILL after KillGrace.
	res := mustExec(t, s, ExecRequest{Command: `sh -c 'trap "" INT; sleep 100'`, Timeout: 50 * time.Millisecond})
	if !res.TimedOut {
		t.Fatalf("not timed out: %+v", res)
	}
	if !isAlive(pid) {
		t.Error("a background job of an earlier command was killed by a timeout")
	}
	s.Close()
	waitGone(t, pid)
}

// TestTimeoutDoesNotLeakDescriptors: an interrupt skips bash's undoing of
// redirections; the recovery frame must close what that leaves open.
func TestTimeoutDoesNotLeakDescriptors(t *testing.T) {
	s := startSession(t, Options{})
	idleFDs := func() int {
		t.Helper()
		sh(t, s, "true")
		for i := 0; i < 1000 && !s.idle(); i++ {
			time.Sleep(time.Millisecond)
		}
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.shell.pid) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := idleFDs()
	for i := 0; i < 10; i++ {
		res := mustExec(t, s, ExecRequest{Command: "sleep 100 </dev/null >/dev/null", Timeout: 20 * time.Millisecond})
		if !res.TimedOut {
			t.Fatalf("not timed out: %+v", res)
		}
	}
	if after := idleFDs(); after > before {
		t.Errorf("shell has %d descriptors after 10 timeouts, %d before", after, before)
	}
}

func TestContextCancel(t *testing.T) {
	s := startSession(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	res, err := s.Exec(ctx, ExecRequest{Command: "sleep 100"})
	if !errors.Is(err, context.Canceled) || !res.TimedOut {
		t.Fatalf("got %+v, %v; want TimedOut and context.Canceled", res, err)
	}
	expectOutput(t, s, "echo ok", "ok\n", 0)
}

func TestOutput(t *testing.T) {
	s := startSession(t, Options{})
	tests := []struct {
		name   string
		req    ExecRequest
		output string
		stderr string
		trunc  bool
	}{
		{"merged in order", ExecRequest{Command: "echo a; echo b >&2; echo c"}, "a\nb\nc\n", "", false},
		{"separate", ExecRequest{Command: "echo a; echo b >&2; echo c", SeparateStderr: true}, "a\nc\n", "b\n", false},
		{"invalid utf-8", ExecRequest{Command: `printf 'ok\xff\xfe\n'`}, `ok\xff\xfe` + "\n", "", false},
		{"nul bytes", ExecRequest{Command: `printf 'a\0b'`}, `a\x00b`, "", false},
		{"no trailing newline", ExecRequest{Command: "printf abc"}, "abc", "", false},
		{"capped", ExecRequest{Command: "seq 1 1000", MaxOutput: 20}, "1\n2\n3\n4\n5\n\n[... 3873 bytes of output omitted ...]\n\n999\n1000\n", "", true},
		{"capped stderr", ExecRequest{Command: "seq 1 1000 >&2; echo out", MaxOutput: 20, SeparateStderr: true}, "out\n", "1\n2\n3\n4\n5\n\n[... 3873 bytes of output omitted ...]\n\n999\n1000\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustExec(t, s, tt.req)
			if res.Output != tt.output || res.Stderr != tt.stderr || res.Truncated != tt.trunc {
				t.Errorf("got %+v, want output %q, stderr %q, truncated %v", res, tt.output, tt.stderr, tt.trunc)
			}
		})
	}
}

func TestBinaryOutput(t *testing.T) {
	s := startSession(t, Options{})
	res := sh(t, s, "head -c 100000 /dev/urandom")
	if !utf8.ValidString(res.Output) || strings.IndexByte(res.Output, 0) >= 0 {
		t.Error("output is not valid UTF-8 without NUL")
	}
	if res.Truncated {
		t.Error("100 KB of output truncated under the default cap")
	}
	expectOutput(t, s, "echo ok", "ok\n", 0)
}

func TestHugeOutputHasBoundedMemory(t *testing.T) {
	s := startSession(t, Options{MaxOutput: 1 << 20})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := sh(t, s, "yes | head -c 100000000; echo; echo END")
	runtime.ReadMemStats(&after)
	if !res.Truncated || !strings.HasSuffix(res.Output, "y\ny\n\nEND\n") || !strings.Contains(res.Output, "bytes of output omitted") {
		t.Errorf("unexpected result: truncated=%v, output ends %q", res.Truncated, res.Output[max(0, len(res.Output)-30):])
	}
	if len(res.Output) > 1<<20+100 {
		t.Errorf("output is %d bytes, cap is 1 MiB", len(res.Output))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("allocated %d MiB to collect 100 MB of output", alloc>>20)
	}
}

func TestBackgroundJobs(t *testing.T) {
	s := startSession(t, Options{})
	t.Run("holding the output pipe does not block", func(t *testing.T) {
		res := sh(t, s, "sleep 1000 & echo started")
		if !strings.HasSuffix(res.Output, "started\n") {
			t.Errorf("output %q", res.Output)
		}
	})
	t.Run("late output is not in a later result", func(t *testing.T) {
		sh(t, s, "(sleep 0.2; echo LATE; echo LATE >&2) &")
		expectOutput(t, s, "sleep 0.5; echo now", "now\n", 0)
		expectOutput(t, s, "echo again", "again\n", 0)
	})
	t.Run("a chatty job neither blocks nor leaks", func(t *testing.T) {
		sh(t, s, "yes SPAM > /dev/stdout & spam=$!")
		for i := 0; i < 3; i++ {
			expectOutput(t, s, "echo quiet", "quiet\n", 0)
		}
		sh(t, s, "kill $spam")
	})
	t.Run("a job that reads stdin does not steal frames", func(t *testing.T) {
		sh(t, s, "cat > /dev/null & reader=$!")
		expectOutput(t, s, "echo one", "one\n", 0)
		expectOutput(t, s, "echo two", "two\n", 0)
		sh(t, s, "kill $reader")
	})
}

func TestCloseKillsEverything(t *testing.T) {
	s := startSession(t, Options{})
	cmds := []string{
		"sleep 1000 >/dev/null 2>&1 & echo $!",
		"nohup sleep 1000 >/dev/null 2>&1 & echo $!",
		"setsid sleep 1000 >/dev/null 2>&1 & echo $!",
		"(setsid sleep 1000 >/dev/null 2>&1 & echo $!)",
		"sh -c 'sleep 1000 & echo $!' >/tmp/msb-close-test-$$ ; cat /tmp/msb-close-test-$$; rm /tmp/msb-close-test-$$",
		"(trap '' HUP TERM INT; exec sleep 1000) >/dev/null 2>&1 & echo $!",
	}
	var pids []int
	for _, c := range cmds {
		out := strings.TrimSpace(sh(t, s, c).Output)
		pid, err := strconv.Atoi(out[strings.LastIndexByte(out, '\n')+1:])
		if err != nil {
			t.Fatalf("%q printed %q", c, out)
		}
		pids = append(pids, pid)
	}
	shellPID := s.shell.pid
	for _, pid := range pids {
		if !isAlive(pid) {
			t.Fatalf("process %d died before Close", pid)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Alive() {
		t.Error("Alive() after Close")
	}
	for _, pid := range append(pids, shellPID) {
		waitGone(t, pid)
	}
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "true"}); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Exec after Close: %v, want ErrSessionEnded", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseDuringExec(t *testing.T) {
	s := startSession(t, Options{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), ExecRequest{Command: "sleep 1000"})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	if err := <-done; !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Exec interrupted by Close: %v, want ErrSessionEnded", err)
	}
}

func TestStatusLostIsReported(t *testing.T) {
	s := startSession(t, Options{})
	// A function named builtin swallows the frame's printf, this one's
	// included.
	for _, c := range []string{"builtin() { :; }", "echo x"} {
		if _, err := s.Exec(context.Background(), ExecRequest{Command: c}); !errors.Is(err, ErrStatusLost) {
			t.Fatalf("%q: got %v, want ErrStatusLost", c, err)
		}
	}
}

func TestConcurrentExecIsSerialized(t *testing.T) {
	s := startSession(t, Options{})
	sh(t, s, "n=0")
	const workers, each = 8, 10
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := s.Exec(context.Background(), ExecRequest{Command: "n=$((n+1)); echo $n"})
				if err != nil {
					t.Error(err)
					return
				}
				v, _ := strconv.Atoi(strings.TrimSpace(res.Output))
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Ints(got)
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("counter values %v: commands interleaved", got)
		}
	}
}

func TestSessionsInParallel(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Start(context.Background(), fmt.Sprint("par", i), Options{KillGrace: testGrace})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if _, err := s.Exec(context.Background(), ExecRequest{Command: fmt.Sprint("id=", i)}); err != nil {
				t.Error(err)
				return
			}
			for j := 0; j < 20; j++ {
				res, err := s.Exec(context.Background(), ExecRequest{Command: "echo $id"})
				if err != nil || res.Output != fmt.Sprint(i, "\n") {
					t.Errorf("session %d: %+v, %v", i, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestChildLister checks the process-tree walk in whichever mode this kernel
// supports (children files, or a scan of every process's parent).
func TestChildLister(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 10 & sleep 10 & (sleep 10) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	var tree []int
	for i := 0; i < 200; i++ { // until the shell has forked all three
		if tree = descendants(childLister(), []int{pid}); len(tree) >= 4 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer signal(tree, unix.SIGKILL)
	if len(tree) < 4 || tree[0] != pid {
		t.Fatalf("descendants of %d (children files: %v) = %v, want the shell and its 3 children", pid, haveChildrenFiles(), tree)
	}
	for _, p := range tree[1:] {
		if st, ok := readStat(p); ok && st.ppid != pid && !slices.Contains(tree, st.ppid) {
			t.Errorf("process %d (parent %d) is not in the tree", p, st.ppid)
		}
	}
}

func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(Result{Output: "o", Stderr: "e", ExitCode: 1, Duration: time.Millisecond, Truncated: true, TimedOut: true, SessionEnded: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"output":"o","stderr":"e","exit_code":1,"duration_ns":1000000,"truncated":true,"timed_out":true,"session_ended":true}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	var req ExecRequest
	if err := json.Unmarshal([]byte(`{"command":"ls","timeout_ns":5,"separate_stderr":true,"max_output":9,"interactive":true,"input":true,"interrupt":true,"expect":[">>> "]}`), &req); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, ExecRequest{Command: "ls", Timeout: 5, SeparateStderr: true, MaxOutput: 9, Interactive: true, Input: true, Interrupt: true, Expect: []string{">>> "}}) {
		t.Errorf("decoded %+v", req)
	}
}

// TestBootTicksMatchesStartTime checks the clock newProcesses compares
// /proc starttime with, on kernels without children files.
func TestBootTicksMatchesStartTime(t *testing.T) {
	before := bootTicks()
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	after := bootTicks()
	st, ok := readStat(cmd.Process.Pid)
	if !ok {
		t.Fatal("cannot read /proc/<pid>/stat")
	}
	if st.startTime+1 < before || st.startTime > after+1 {
		t.Errorf("starttime %d outside [%d, %d]", st.startTime, before, after)
	}
}

// TestStartErrors: a session that cannot start says why, naming what is
// wrong (the shell, or the working directory, not the shell when the
// directory is missing), and the session's name once.
func TestStartErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no such shell", Options{Shell: "/nonexistent/bash"}, "running /nonexistent/bash"},
		{"no such dir", Options{Dir: "/nonexistent/dir"}, "working directory /nonexistent/dir: no such file or directory"},
		{"dir is a file", Options{Dir: file}, "working directory " + file + " is not a directory"},
		{"not bash", Options{Shell: "/bin/true"}, "/bin/true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := Start(ctx, "bad", tt.opts)
			if err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Count(msg, `session "bad"`) != 1 {
				t.Fatalf("error %q, want it to say %q and name the session once", msg, tt.want)
			}
		})
	}
}

func TestEnvAndMarker(t *testing.T) {
	s := startSession(t, Options{Env: []string{"PATH=/usr/bin:/bin", "ONLY=this", MarkerEnv + "=spoofed"}})
	res := sh(t, s, "env | grep -v '^_=\\|^SHLVL=\\|^PWD=\\|^OLDPWD=' | sort")
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	want := []string{MarkerEnv + "=" + s.marker, "ONLY=this", "PATH=/usr/bin:/bin"}
	if !slices.Equal(lines, want) {
		t.Errorf("environment %q, want %q", lines, want)
	}
}

func TestRunOnce(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		opts     Options
		req      ExecRequest
		output   string
		stderr   string
		code     int
		timedOut bool
	}{
		{"echo", Options{}, ExecRequest{Command: "echo hi"}, "hi\n", "", 0, false},
		{"exit code", Options{}, ExecRequest{Command: "echo a; exit 5"}, "a\n", "", 5, false},
		{"separate stderr", Options{}, ExecRequest{Command: "echo a; echo b >&2", SeparateStderr: true}, "a\n", "b\n", 0, false},
		{"dir and env", Options{Dir: dir, Env: []string{"X=1"}}, ExecRequest{Command: "echo $X; pwd"}, "1\n" + dir + "\n", "", 0, false},
		{"stdin gets no data", Options{KillGrace: testGrace}, ExecRequest{Command: "cat", Timeout: 100 * time.Millisecond}, "", "", 130, true},
		{"timeout", Options{KillGrace: testGrace}, ExecRequest{Command: "sleep 100; echo NOT", Timeout: 100 * time.Millisecond}, "", "", 130, true},
		{"ignores SIGINT", Options{KillGrace: testGrace}, ExecRequest{Command: "trap '' INT; sleep 100", Timeout: 100 * time.Millisecond}, "", "", 137, true},
		{"syntax error", Options{}, ExecRequest{Command: "if then"}, "bash: -c: line 1: syntax error near unexpected token `then'\nbash: -c: line 1: `if then'\n", "", 2, false},
		{"invalid utf-8", Options{}, ExecRequest{Command: `printf '\xff\0'`}, `\xff\x00`, "", 0, false},
		{"background job holds pipe", Options{}, ExecRequest{Command: "sleep 1000 & echo bg"}, "bg\n", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := RunOnce(context.Background(), tt.opts, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != tt.output || res.Stderr != tt.stderr || res.ExitCode != tt.code || res.TimedOut != tt.timedOut || res.SessionEnded {
				t.Errorf("got %+v, want output %q, stderr %q, code %d, timed out %v", res, tt.output, tt.stderr, tt.code, tt.timedOut)
			}
		})
	}
	t.Run("NUL", func(t *testing.T) {
		if _, err := RunOnce(context.Background(), Options{}, ExecRequest{Command: "\x00"}); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("got %v, want ErrInvalidCommand", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, err := RunOnce(ctx, Options{KillGrace: testGrace}, ExecRequest{Command: "sleep 100"})
		if !errors.Is(err, context.DeadlineExceeded) || !res.TimedOut {
			t.Errorf("got %+v, %v", res, err)
		}
	})
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// FuzzExecEcho sends arbitrary bytes through the framing (as the argument
// of printf) and checks that they come back exactly and that the session
// stays consistent. The data is quoted, never run.
func FuzzExecEcho(f *testing.F) {
	for _, seed := range []string{"", "hello", "a'b\"c\\d", "line1\nline2\n", "$(echo pwned)`x`", "!!", "\xff\xfe",
		"}; echo", "'$'\\x41'", "\r\n\t", strings.Repeat("x", 5000), "\x1b[31m", "-n", "%s%d"} {
		f.Add(seed)
	}
	s := startSession(f, Options{})
	f.Fuzz(func(t *testing.T, data string) {
		res, err := s.Exec(context.Background(), ExecRequest{Command: "printf '%s' " + shellQuote(data), Timeout: 10 * time.Second})
		if strings.IndexByte(data, 0) >= 0 {
			if !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("NUL in command: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := sanitize([]byte(data)); res.Output != want || res.ExitCode != 0 {
			t.Fatalf("printf %q: got %+v, want output %q", data, res, want)
		}
		if res, err := s.Exec(context.Background(), ExecRequest{Command: "echo ok"}); err != nil || res.Output != "ok\n" {
			t.Fatalf("after printf %q: %+v, %v", data, res, err)
		}
	})
}

func BenchmarkExecTrue(b *testing.B) {
	s := startSession(b, Options{})
	req := ExecRequest{Command: "true"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Exec(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkExecEcho1KB(b *testing.B) {
	s := startSession(b, Options{})
	req := ExecRequest{Command: "printf '%s' " + strings.Repeat("x", 1024)}
	for i := 0; i < b.N; i++ {
		if _, err := s.Exec(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRunOnceTrue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := RunOnce(context.Background(), Options{}, ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStartClose(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s, err := Start(context.Background(), "bench", Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// TestInterruptAbandonsList repeats the race behind a timed-out
// `cat; echo NOT-REACHED`: the interrupt must reach the shell before its
// foreground job dies of it, or bash goes on with the list.
func TestInterruptAbandonsList(t *testing.T) {
	// A long grace: on a starved machine the shell must not be killed
	// (ending the session) before it gets to run; cat dies of the SIGINT.
	s := startSession(t, Options{KillGrace: 10 * time.Second})
	for i := 0; i < 50; i++ {
		res := mustExec(t, s, ExecRequest{Command: "cat; echo NOT-REACHED", Timeout: 20 * time.Millisecond})
		if !res.TimedOut || strings.Contains(res.Output, "NOT-REACHED") {
			t.Fatalf("round %d: got %+v, want TimedOut without NOT-REACHED", i, res)
		}
	}
}

// TestChanDir: the named pipes of a session live in its channel dir, are
// not the engine's /proc entries, and are all gone after Close.
func TestChanDir(t *testing.T) {
	dir := t.TempDir()
	s := startSession(t, Options{ChanDir: dir})
	res := sh(t, s, "readlink /proc/self/fd/1; ls "+dir+" | wc -l")
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], dir+"/ch-") || lines[1] != "3" {
		t.Fatalf("output %q: want the command's stdout to be a named pipe in %s, beside stdin and status", res.Output, dir)
	}
	if res := mustExec(t, s, ExecRequest{Command: "sleep 100", Timeout: 20 * time.Millisecond}); !res.TimedOut {
		t.Fatalf("not timed out: %+v", res)
	}
	s.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d entries left in the channel dir after Close", len(ents))
	}
}

// TestEarlyInterrupt: an interrupt in the first moments of a command, when
// the shell may be forking it, ends the command and leaves the session
// usable. The shell could answer the recovery frame before its fork had
// exec'd the program, which then ran on unsignalled while the shell, in
// the next command, waited for it (that command timed out and the session
// ended). A timed-out command first, as in the Python client's test that
// found it; interrupts 0-500 µs after Exec starts.
func TestEarlyInterrupt(t *testing.T) {
	s := startSession(t, Options{})
	for i := 0; i < 40; i++ {
		if r := mustExec(t, s, ExecRequest{Command: "sleep 30", Timeout: 50 * time.Millisecond}); !r.TimedOut {
			t.Fatalf("sleep 30 with a timeout: %+v", r)
		}
		ctx, cancel := context.WithCancel(context.Background())
		delay := time.Duration(rand.Intn(500)) * time.Microsecond
		time.AfterFunc(delay, cancel)
		first, err := s.Exec(ctx, ExecRequest{Command: "sleep 60; echo no"})
		cancel()
		if err == nil || strings.Contains(first.Output, "no") {
			t.Fatalf("interrupted after %v: %+v %v, want it interrupted before the echo", delay, first, err)
		}
		res, err := s.Exec(context.Background(), ExecRequest{Command: "echo yes", Timeout: 30 * time.Second})
		if err != nil || res.Output != "yes\n" || res.TimedOut {
			t.Fatalf("after an interrupt %v into a command (%+v): %+v %v", delay, first, res, err)
		}
	}
}

// escapeeCommands start, as background jobs, processes that a kill of the
// shell's tree, group and marker misses: tag1's sleep clears its
// environment and is re-parented (its subshell exits) in a process group
// of its own, but stays in the shell's session; tag2's loop starts, as fast
// as it can, sleeps that clear their environment and leave the session
// (setsid), found only as the loop's children while it lives. A loop
// killed before it is stopped forks a last few that its death re-parents.
func escapeeCommands(tag1, tag2 string) []string {
	return []string{
		"set -m; (env -i sleep " + tag1 + " >/dev/null 2>&1 &)",
		"(for i in $(seq 3000); do env -i setsid sleep " + tag2 + " >/dev/null 2>&1 & done; wait) >/dev/null 2>&1 &",
	}
}

// sleepsOf lists this binary's live descendants (orphans are re-parented
// here: TestMain) running `sleep arg`.
func sleepsOf(arg string) []int {
	var out []int
	forEachPID(func(pid int) {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || string(cmdline) != "sleep\x00"+arg+"\x00" || !descendant(pid) {
			return
		}
		if st, ok := readStat(pid); ok && alive(st) {
			out = append(out, pid)
		}
	})
	return out
}

// killSleeps kills what sleepsOf finds, so that a failed test leaks nothing.
func killSleeps(args ...string) {
	for range 3 {
		for _, arg := range args {
			signal(sleepsOf(arg), unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSleeps waits until at least n processes run `sleep arg`.
func waitSleeps(t *testing.T, arg string, n int) {
	t.Helper()
	for i := 0; len(sleepsOf(arg)) < n; i++ {
		if i == 1000 {
			t.Fatalf("%d processes run sleep %s after 10 s, want %d", len(sleepsOf(arg)), arg, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseKillsEscapees: Close kills a session's processes that left its
// process group and cleared their environment but stayed in its session,
// and those a fork loop starts while Close runs, which leave the session
// too. Before, Close killed the loop while it forked and returned with the
// sleeps it started last alive, and the first kind alive always.
func TestCloseKillsEscapees(t *testing.T) {
	const tag1, tag2 = "1001.5", "1002.5"
	defer killSleeps(tag1, tag2)
	s := startSession(t, Options{})
	for _, c := range escapeeCommands(tag1, tag2) {
		sh(t, s, c)
	}
	waitSleeps(t, tag1, 1)
	waitSleeps(t, tag2, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := sleepsOf(tag1); len(left) > 0 {
		t.Errorf("right after Close: %d of the sleeps that left the process group alive", len(left))
	}
	if left := sleepsOf(tag2); len(left) > 0 {
		t.Errorf("right after Close: %d of the fork loop's sleeps alive", len(left))
	}
}

// TestRunOnceKillsEscapees is TestCloseKillsEscapees for RunOnce, which
// kills what its command left once the shell exits.
func TestRunOnceKillsEscapees(t *testing.T) {
	const tag1, tag2 = "1003.5", "1004.5"
	defer killSleeps(tag1, tag2)
	cmds := escapeeCommands(tag1, tag2)
	res, err := RunOnce(context.Background(), Options{}, ExecRequest{
		Command: cmds[0] + "; " + cmds[1] + " until [ $(ps -eo args | grep -c '^sleep " + tag1 + "$') -ge 1 ] && " +
			"[ $(ps -eo args | grep -c '^sleep " + tag2 + "$') -ge 50 ]; do sleep 0.01; done"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("RunOnce: %+v %v", res, err)
	}
	if left := sleepsOf(tag1); len(left) > 0 {
		t.Errorf("right after RunOnce: %d of the sleeps that left the process group alive", len(left))
	}
	if left := sleepsOf(tag2); len(left) > 0 {
		t.Errorf("right after RunOnce: %d of the fork loop's sleeps alive", len(left))
	}
}

// TestCloseNamesSurvivors: a process of the session that does not die of
// its SIGKILL (here one in a frozen cgroup v1 freezer, which holds the
// signal until it is thawed) is named in Close's error. Before, Close
// returned nil after its passes, as if it had killed everything. A frozen
// cgroup v2 process dies of SIGKILL: a host without a v1 freezer has no
// such survivor to make, and the test is skipped, even when strict.
func TestCloseNamesSurvivors(t *testing.T) {
	privtest.RequireRoot(t)
	base := "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
		t.Skipf("no cgroup v1 freezer at %s: %v", base, err)
	}
	cg := filepath.Join(base, fmt.Sprintf("msb-test-survivor-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(cg)
	write := func(file, value string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(cg, file), []byte(value), 0o644); err != nil {
			t.Fatalf("writing %s to %s: %v", value, file, err)
		}
	}
	s := startSession(t, Options{})
	out := strings.TrimSpace(sh(t, s, "sleep 1005.5 >/dev/null 2>&1 & echo $!").Output)
	out = out[strings.LastIndexByte(out, '\n')+1:] // after the shell's "[1] pid"
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("the background sleep's pid: %q", out)
	}
	write("cgroup.procs", out)
	defer func() {
		write("freezer.state", "THAWED")
		waitGone(t, pid)
	}()
	write("freezer.state", "FROZEN")
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(filepath.Join(cg, "freezer.state")); strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		if i == 500 {
			t.Fatal("the freezer cgroup did not freeze in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = s.Close()
	if want := fmt.Sprintf("%d (sleep, ", pid); !errors.Is(err, ErrSurvivors) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Close with a frozen sleep: %v, want ErrSurvivors naming %s...)", err, want)
	}
}
