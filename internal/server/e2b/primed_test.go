package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// login is commands.run's form of cmd, with cwd when not "".
func login(cmd, cwd string) *process.ProcessConfig {
	cfg := &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
	if cwd != "" {
		cfg.Cwd = &cwd
	}
	return cfg
}

// primedStarts is how many processes of the sandbox started in a primed
// shell, by its log.
func (c envdClient) primedStarts(t *testing.T) int {
	t.Helper()
	status, logs := call(t, "GET", c.url+"/sandboxes/"+c.id+"/logs", map[string]string{"X-API-Key": testKey})
	if status != http.StatusOK {
		t.Fatalf("logs: %d %v", status, logs)
	}
	return strings.Count(fmt.Sprint(logs["logs"]), "started in a primed shell")
}

// probe prints what a command can see of the shell it runs in, then
// fails on its line 13 and exits 7.
const probe = `echo "$0|$SHLVL|${FROM_PROFILE-}|${FLAG-unset}|$LINENO|$?|$#|$-|$PWD|${#BASH_EXECUTION_STRING}"
[ "$BASH_EXECUTION_STRING" = "$(cat /tmp/probe)" ] && echo execution string is the command
ls /proc/$$/fd >/tmp/fds; tr '\n' ' ' </tmp/fds; echo
compgen -v | grep -v '^\(_\|BASHPID\|RANDOM\|SRANDOM\|EPOCHREALTIME\|EPOCHSECONDS\|PIPESTATUS\|SECONDS\)$' | tr '\n' ' '; echo
compgen -A function | tr '\n' ' '; echo
shopt -s | tr -s ' \t\n' ' '; echo
set -o | grep on | tr -s ' \t\n' ' '; echo
trap -p
umask
readlink /proc/$$/fd/0
ps -o comm= --ppid $$
echo "$(pwd -P)"
nosuchcommand
exit 7`

// TestE2BPrimedShell: a command of commands.run's form that comes after
// another one ended runs in the shell primed for it, and sees exactly
// what the first one, run in a shell of its own, saw: $0, shell level,
// the profile's variables, line numbers, $BASH_EXECUTION_STRING, open
// descriptors, variables and functions, options, traps, stdin, children,
// errors and exit code; SECONDS counts from the command, not from when
// the shell was primed. A file operation discards the primed shell (the
// next command reads the profile as it is now), as does a command of
// another shape; a command killed in a primed shell leaves nothing
// behind; commands in parallel each get their own shell.
func TestE2BPrimedShell(t *testing.T) {
	c := createSandbox(t, startFront(t))
	c.sh(t, `printf 'export FROM_PROFILE=yes; echo profile >&2\n[ -d ~/flag ] && export FLAG=1\n: >/tmp/profile-read\n' > ~/.profile`)
	c.sh(t, "cat > /tmp/probe <<'EOF'\n"+probe+"\nEOF")
	fresh, freshErr, freshCode := c.run(t, login(probe, ""))
	if n := c.primedStarts(t); n != 0 {
		t.Fatalf("%d processes started in a primed shell before any command ended, want 0", n)
	}
	primed, primedErr, primedCode := c.run(t, login(probe, ""))
	if n := c.primedStarts(t); n != 1 {
		t.Fatalf("the second command: %d processes started in a primed shell, want 1", n)
	}
	if primed != fresh || primedErr != freshErr || primedCode != freshCode {
		t.Errorf("in a primed shell the probe printed\n%s\nstderr %q, exit %d; in a shell of its own\n%s\nstderr %q, exit %d",
			primed, primedErr, primedCode, fresh, freshErr, freshCode)
	}
	wantHead := fmt.Sprintf("/bin/bash|1|yes|unset|1|0|0|hBc|/home/user|%d\nexecution string is the command\n", len(probe))
	if !strings.HasPrefix(fresh, wantHead) || !strings.Contains(fresh, "\n/dev/null\n") || freshCode != 7 ||
		freshErr != "profile\n/bin/bash: line 13: nosuchcommand: command not found\n" {
		t.Errorf("the probe printed\n%s\nstderr %q, exit %d; want it to start %q, stdin /dev/null, the profile's line and the error on line 13 on stderr, exit 7",
			fresh, freshErr, freshCode, wantHead)
	}

	// Once the shell primed after this command has read the profile, the
	// directory it tests appears.
	c.run(t, login("rm /tmp/profile-read", ""))
	c.waitFor(t, "/tmp/profile-read")
	if _, err := c.fs.MakeDir(context.Background(), req(c, &filesystem.MakeDirRequest{Path: "/home/user/flag"})); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if out, _, _ := c.run(t, login("echo ${FLAG-unset}", "")); out != "1\n" {
			t.Errorf("command %d after make_dir of the directory the profile tests: FLAG=%q, want 1", i, out)
		}
	}
	if n := c.primedStarts(t); n != 3 {
		t.Errorf("%d processes in primed shells after make_dir and two commands, want 3: the primed shell make_dir discarded was not used", n)
	}

	time.Sleep(4 * time.Second) // the primed shell waits
	if out, _, _ := c.run(t, login(`echo "$SECONDS"`, "")); out != "0\n" && out != "1\n" {
		t.Errorf("$SECONDS of a command that found its shell waiting 4 s: %q, want 0 or 1", out)
	}
	if out, _, _ := c.run(t, login("pwd", "/tmp")); out != "/tmp\n" {
		t.Errorf("a command with cwd /tmp after others without: pwd %q", out)
	}
	if n := c.primedStarts(t); n != 4 {
		t.Errorf("%d processes in primed shells, want 4: a command of another cwd takes none", n)
	}

	c.run(t, login("true", "")) // makes the next shell primed for no cwd
	// A command that ignores SIGINT: the engine's SIGKILL comes after the
	// kill grace.
	c.killInPrimed(t, "trap '' INT; sleep 60")
	out, _, _ := c.run(t, login(`ps -eo args | grep -c '^sleep 60'; ls /dev/.msb-session | grep -c '^e2b-login' || true`, ""))
	if out != "0\n0\n" {
		t.Errorf("after a command in a primed shell was killed: %q sleeps and FIFOs of primed shells, want none", out)
	}

	c.run(t, login("true", ""))
	before := c.primedStarts(t)
	var wg sync.WaitGroup
	outs := make([]string, 8)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _, _ = c.run(t, login(fmt.Sprintf("echo %d", i), ""))
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if o != fmt.Sprintf("%d\n", i) {
			t.Errorf("parallel command %d printed %q", i, o)
		}
	}
	if n := c.primedStarts(t) - before; n != 1 {
		t.Errorf("8 commands at once with a primed shell waiting: %d took it, want 1", n)
	}
}

// waitFor waits until path exists in the sandbox (Stat changes nothing).
func (c envdClient) waitFor(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		_, err := c.fs.Stat(context.Background(), req(c, &filesystem.StatRequest{Path: path}))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in a minute: %v", path, err)
		}
	}
}

// killInPrimed starts cmd, which must take the primed shell, signals it
// once started and checks that its stream ends killed.
func (c envdClient) killInPrimed(t *testing.T, cmd string) {
	t.Helper()
	before := c.primedStarts(t)
	pc := processconnect.NewProcessClient(http.DefaultClient, c.url)
	s, err := pc.Start(context.Background(), req(c, &process.StartRequest{Process: login(cmd, "")}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() {
		t.Fatalf("%s: no start event: %v", cmd, s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	if n := c.primedStarts(t); n != before+1 {
		t.Fatalf("%s did not start in a primed shell (%d, want %d)", cmd, n, before+1)
	}
	sig := &process.SendSignalRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
		Signal: process.Signal_SIGNAL_SIGKILL}
	if _, err := pc.SendSignal(context.Background(), req(c, sig)); err != nil {
		t.Fatal(err)
	}
	// The answer comes once the process is dead: no longer listed.
	list, err := pc.List(context.Background(), req(c, &process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid {
			t.Errorf("%s is still listed right after the answer to its SIGKILL", cmd)
		}
	}
	for s.Receive() {
		if end := s.Msg().GetEvent().GetEnd(); end != nil {
			if end.GetStatus() != "signal: killed" {
				t.Errorf("%s killed: end %v, want signal: killed", cmd, end)
			}
			return
		}
	}
	t.Fatalf("%s killed: the stream ended without an end event: %v", cmd, s.Err())
}

// TestE2BPrimedSDK: through the e2b SDK, commands that run in primed
// shells (testdata/sdk_primed.py) see the profile, $0 and their own
// command; fail with their own exit code and errors; follow each other
// and run in parallel with their own output; see a profile the files API
// rewrote; read end of file on stdin; can be killed, leaving nothing; and
// stdin, cwd, envs, pause and resume work beside them.
func TestE2BPrimedSDK(t *testing.T) {
	out := sdkScript(t, "sdk_primed.py")
	var got struct {
		Login      string   `json:"login"`
		Failed     []any    `json:"failed"`
		Sequence   []string `json:"sequence"`
		AfterWrite []string `json:"after_write"`
		Stdin      string   `json:"stdin"`
		Killed     bool     `json:"killed"`
		KilledWait []any    `json:"killed_wait"`
		Left       string   `json:"left"`
		WithStdin  string   `json:"with_stdin"`
		Parallel   []string `json:"parallel"`
		Cwd        string   `json:"cwd"`
		Envs       string   `json:"envs"`
		Resumed    []string `json:"resumed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if want := `/bin/bash|1|yes|echo "$0|$SHLVL|$FROM_PROFILE|$BASH_EXECUTION_STRING"` + "\n"; got.Login != want {
		t.Errorf("$0, shell level, the profile's variable and the execution string: %q, want %q", got.Login, want)
	}
	if want := fmt.Sprint([]any{3.0, "before\n", "/bin/bash: line 1: nosuchcommand: command not found\n"}); fmt.Sprint(got.Failed) != want {
		t.Errorf("a failing command: %v, want %s", got.Failed, want)
	}
	for i, o := range got.Sequence {
		if o != fmt.Sprintf("%d\n", i) {
			t.Errorf("command %d of 20 in a row printed %q", i, o)
		}
	}
	if len(got.Sequence) != 20 {
		t.Errorf("%d of 20 commands in a row answered", len(got.Sequence))
	}
	if fmt.Sprint(got.AfterWrite) != "[rewritten\n rewritten\n]" {
		t.Errorf("after files.write of ~/.profile: %q, want the rewritten profile's value twice", got.AfterWrite)
	}
	if got.Stdin != "/dev/null\n" {
		t.Errorf("cat; readlink /proc/self/fd/0: %q, want end of file at once from /dev/null", got.Stdin)
	}
	if !got.Killed || len(got.KilledWait) != 2 || got.KilledWait[1] != "" || got.Left != "0\n" {
		t.Errorf("kill of a command: %v, wait %v, %q sleeps left; want killed, no output, none left", got.Killed, got.KilledWait, got.Left)
	}
	if got.WithStdin != "typed\n" {
		t.Errorf("cat given stdin: %q", got.WithStdin)
	}
	for i, o := range got.Parallel {
		if o != fmt.Sprintf("%d\n", i) {
			t.Errorf("parallel command %d printed %q", i, o)
		}
	}
	if got.Cwd != "/tmp\n" || got.Envs != "1|rewritten\n" {
		t.Errorf("cwd /tmp: %q; envs X=1: %q", got.Cwd, got.Envs)
	}
	if fmt.Sprint(got.Resumed) != "[rewritten\n rewritten\n]" {
		t.Errorf("after pause and resume: %q", got.Resumed)
	}
}
