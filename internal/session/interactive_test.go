package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// prompt matches python3's primary prompt.
const prompt = `>>> `

// interact sends input to the interactive command and returns the result.
func interact(t *testing.T, s *Session, req ExecRequest) Result {
	t.Helper()
	req.Input = true
	return mustExec(t, s, req)
}

func TestInteractivePython(t *testing.T) {
	s := startSession(t, Options{Dir: t.TempDir()})
	sh(t, s, "cd /tmp && v=kept")
	res := mustExec(t, s, ExecRequest{Command: "python3 -q", Interactive: true, Expect: []string{prompt}})
	if !res.Running || res.Matched != prompt || res.TimedOut {
		t.Fatalf("starting python3: %+v, want it running at its prompt", res)
	}
	res = interact(t, s, ExecRequest{Command: "print(6*7)\n", Expect: []string{prompt}})
	if !res.Running || res.Output != "42\n" || res.Matched != prompt {
		t.Fatalf("print(6*7): %+v, want output \"42\\n\" up to the prompt", res)
	}
	// Two lines at once: the output of both, up to the first prompt; the
	// rest is there for the next call.
	res = interact(t, s, ExecRequest{Command: "x = 5\nprint(x+1)\n", Expect: []string{`6\n`}})
	if !res.Running || res.Output != prompt {
		t.Fatalf("two lines: %+v, want the prompt before 6", res)
	}
	res = interact(t, s, ExecRequest{Command: "exit()\n", Expect: []string{`NEVER`}})
	if res.Running || res.ExitCode != 0 || res.Output != prompt {
		t.Fatalf("exit(): %+v, want python3 done with the rest of its output", res)
	}
	// The shell is a shell again, its state intact.
	expectOutput(t, s, `echo "$PWD $v"`, "/tmp kept\n", 0)
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "x\n", Input: true}); !errors.Is(err, ErrNotInteractive) {
		t.Fatalf("input with nothing running: %v, want ErrNotInteractive", err)
	}
}

func TestInteractiveWaitTimesOut(t *testing.T) {
	s := startSession(t, Options{})
	res := mustExec(t, s, ExecRequest{Command: "cat", Interactive: true, Expect: []string{"DONE"}, Timeout: 50 * time.Millisecond})
	if !res.Running || !res.TimedOut || res.Output != "" {
		t.Fatalf("cat with no input: %+v, want a wait that timed out", res)
	}
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "echo hi"}); !errors.Is(err, ErrInteractiveRunning) {
		t.Fatalf("a command while cat runs: %v, want ErrInteractiveRunning", err)
	}
	res = interact(t, s, ExecRequest{Command: "partial\n", Timeout: 100 * time.Millisecond})
	if !res.Running || !res.TimedOut || res.Output != "partial\n" && res.Output != "" {
		t.Fatalf("no pattern: %+v, want what cat echoed so far shown after the timeout", res)
	}
	// Output not consumed by a timed-out wait comes back with the next.
	res = interact(t, s, ExecRequest{Command: "DONE\n", Expect: []string{"DONE"}})
	if !res.Running || res.Output != "partial\n" || res.Matched != "DONE" {
		t.Fatalf("after a timeout: %+v, want the earlier output again", res)
	}
	// An interrupt ends cat (it does not survive SIGINT); the session is usable.
	res = interact(t, s, ExecRequest{Interrupt: true, Expect: []string{"NEVER"}})
	if res.Running || !res.TimedOut || res.ExitCode != 130 || res.Output != "\n" {
		t.Fatalf("interrupting cat: %+v, want it ended by SIGINT", res)
	}
	expectOutput(t, s, "echo back", "back\n", 0)
}

// TestInteractiveInterruptSurvivor: python3 catches SIGINT; an interrupt
// that expects its prompt leaves it running.
func TestInteractiveInterruptSurvivor(t *testing.T) {
	s := startSession(t, Options{})
	mustExec(t, s, ExecRequest{Command: "python3 -q", Interactive: true, Expect: []string{prompt}})
	res := interact(t, s, ExecRequest{Command: "import time; print('sleeping', flush=True); time.sleep(100)\n", Expect: []string{`sleeping\n`}})
	if !res.Running {
		t.Fatalf("sleep: %+v, want python3 sleeping", res)
	}
	res = interact(t, s, ExecRequest{Interrupt: true, Expect: []string{prompt}})
	if !res.Running || !strings.Contains(res.Output, "KeyboardInterrupt") || res.Matched != prompt {
		t.Fatalf("interrupt: %+v, want KeyboardInterrupt and the prompt", res)
	}
	res = interact(t, s, ExecRequest{Command: "print('alive')\n", Expect: []string{prompt}})
	if res.Output != "alive\n" {
		t.Fatalf("after the interrupt: %+v", res)
	}
	res = interact(t, s, ExecRequest{Command: "import sys; sys.exit(3)\n"})
	if res.Running || res.ExitCode != 3 {
		t.Fatalf("sys.exit(3): %+v", res)
	}
	expectOutput(t, s, "echo $?", "3\n", 0)
}

// TestInteractiveInterruptRepeated: a program that misses the first Ctrl-C
// (python3 can, at its prompt) gets another while it stays quiet, before
// the grace time ends in SIGKILL.
func TestInteractiveInterruptRepeated(t *testing.T) {
	s := startSession(t, Options{KillGrace: 10 * time.Second})
	deaf := `python3 -c $'import signal, time\nn = 0\ndef h(*a):\n    global n\n    n += 1\n    if n == 2: print("second", flush=True)\nsignal.signal(signal.SIGINT, h)\nprint("ready", flush=True)\nwhile True: time.sleep(1)'`
	if res := mustExec(t, s, ExecRequest{Command: deaf, Interactive: true, Expect: []string{`ready\n`}}); !res.Running {
		t.Fatalf("start: %+v", res)
	}
	res := interact(t, s, ExecRequest{Interrupt: true, Expect: []string{`second\n`}})
	if !res.Running || res.Matched != `second\n` || res.Duration >= 5*time.Second {
		t.Fatalf("interrupt: %+v, want the program's answer to a second SIGINT, well before the grace time", res)
	}
}

// TestInteractiveCannotFakeEnd: what an interactive command prints
// (status-like lines, a prompt, to its output or to its terminal) ends
// neither the command nor a wait, unless it matches the caller's pattern.
func TestInteractiveCannotFakeEnd(t *testing.T) {
	s := startSession(t, Options{})
	fake := strings.Repeat("0", nonceLen) + " 0\nSHELLPS1PREFIX\n"
	cmd := "printf '" + strings.ReplaceAll(fake, "\n", `\n`) + "'; printf 'tty\\n' >/dev/tty; sleep 0.2; echo READY; read -r line; echo \"got $line\""
	res := mustExec(t, s, ExecRequest{Command: cmd, Interactive: true, Expect: []string{"READY\n"}})
	if !res.Running || res.Matched != "READY\n" || !strings.Contains(res.Output, fake) || !strings.Contains(res.Output, "tty\n") {
		t.Fatalf("fake status lines: %+v, want the command still running and its output shown", res)
	}
	res = interact(t, s, ExecRequest{Command: "x\n", Expect: []string{"NEVER"}})
	if res.Running || res.ExitCode != 0 || res.Output != "got x\n" {
		t.Fatalf("read: %+v", res)
	}
	// A normal command's stdin is still the pipe nobody writes to.
	res = mustExec(t, s, ExecRequest{Command: "read -r line; echo \"[$line]\"", Timeout: 100 * time.Millisecond})
	if !res.TimedOut || res.Output != "" {
		t.Fatalf("read in a normal command: %+v, want a timeout with no input", res)
	}
}

func TestInteractiveRequestErrors(t *testing.T) {
	s := startSession(t, Options{})
	for _, req := range []ExecRequest{
		{Command: "cat", Interactive: true, SeparateStderr: true},
		{Command: "cat", Expect: []string{"x"}},
		{Command: "cat", Interactive: true, Expect: []string{"("}},
		{Command: "cat", Interactive: true, Input: true},
		{Command: "cat", Interrupt: true},
	} {
		if _, err := s.Exec(context.Background(), req); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("Exec(%+v): %v, want ErrInvalidCommand", req, err)
		}
	}
}

// TestAfterInteractive: once the terminal has served an interactive
// command (it is now the shell's controlling terminal), normal commands
// time out and abandon their list as before, and what stays running at
// Close goes with the session.
func TestAfterInteractive(t *testing.T) {
	s := startSession(t, Options{})
	res := mustExec(t, s, ExecRequest{Command: "head -c0", Interactive: true}) // ends at once
	if res.Running || res.ExitCode != 0 {
		t.Fatalf("head -c0: %+v", res)
	}
	res = mustExec(t, s, ExecRequest{Command: "cat; echo NOT-REACHED", Timeout: 100 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != 130 || res.Output != "" {
		t.Fatalf("timeout after an interactive command: %+v", res)
	}
	expectOutput(t, s, "tty; echo $?", "not a tty\n1\n", 0)
	// Left running: Close (the test's cleanup) kills it; TestMain checks.
	res = mustExec(t, s, ExecRequest{Command: "python3 -q", Interactive: true, Expect: []string{prompt}})
	if !res.Running {
		t.Fatalf("python3: %+v", res)
	}
}
