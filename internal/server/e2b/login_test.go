package e2b

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// run starts cfg in the sandbox and returns its output and exit code.
func (c envdClient) run(t *testing.T, cfg *process.ProcessConfig) (stdout, stderr string, code int32) {
	t.Helper()
	pc := processconnect.NewProcessClient(http.DefaultClient, c.url)
	s, err := pc.Start(context.Background(), req(c, &process.StartRequest{Process: cfg}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out, errOut strings.Builder
	for s.Receive() {
		ev := s.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		errOut.Write(ev.GetData().GetStderr())
		if end := ev.GetEnd(); end != nil {
			return out.String(), errOut.String(), end.GetExitCode()
		}
	}
	t.Fatalf("%v: the stream ended without an end event: %v", cfg, s.Err())
	return "", "", 0
}

// TestE2BLoginShell: commands.run's /bin/bash -l -c runs as the login
// shell envd starts: the profiles read first, then the script, with the
// process's cwd and envs, $0 /bin/bash, errors on the script's own line
// numbers, and one shell level (envd's bash is the first; msb runs the
// script in the engine's bash rather than a second one exec'd from it).
// Any other command keeps its own argv.
func TestE2BLoginShell(t *testing.T) {
	c := createSandbox(t, startFront(t))
	c.sh(t, `mkdir -p ~/work && echo 'export FROM_PROFILE=yes; echo profile >&2' > ~/.profile`)
	cwd := "work"
	out, errOut, code := c.run(t, &process.ProcessConfig{Cmd: "/bin/bash", Cwd: &cwd, Envs: map[string]string{"A": "it's 1", "B": "2"},
		Args: []string{"-l", "-c", `echo "$SHLVL|$0|$FROM_PROFILE|$A|$B|$PWD"` + "\nnosuchcommand"}})
	if want := "1|/bin/bash|yes|it's 1|2|/home/user/work\n"; out != want || code != 127 {
		t.Errorf("bash -l -c printed %q and exited %d; want %q (shell level, $0, the profile's variable, envs, cwd) and 127", out, code, want)
	}
	if want := "profile\n/bin/bash: line 2: nosuchcommand: command not found\n"; errOut != want {
		t.Errorf("bash -l -c's stderr: %q, want %q (the profile first, then the script's error on its own line 2)", errOut, want)
	}
	out, _, code = c.run(t, &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", `echo "$SHLVL|$0|${FROM_PROFILE-unset}"`, "argv0"}})
	if want := "1|argv0|unset\n"; out != want || code != 0 {
		t.Errorf("bash -c with an argv0 printed %q, exit %d; want %q (no profile, its own $0)", out, code, want)
	}
	_, _, code = c.run(t, &process.ProcessConfig{Cmd: "/bin/bash", Envs: map[string]string{"NOT-A-NAME": "x"}, Args: []string{"-l", "-c", "true"}})
	if code == 0 {
		t.Errorf("an env name bash cannot export: exit 0, want the engine's refusal")
	}
}

// TestE2BLoginShellIDFromBash: the `id -u` that Debian's /etc/profile
// runs is answered by the login shell itself ($EUID), not by a program
// started for it; the profile still sets root's PATH from it, and after
// the profile `id` is the real program again, arguments and all. An id
// first on the PATH the SDK gives marks each time it is started.
func TestE2BLoginShellIDFromBash(t *testing.T) {
	c := createSandbox(t, startFront(t))
	c.sh(t, `mkdir -p /tmp/fakeid && printf '#!/bin/sh\ntouch /tmp/fakeid/started\nexec /usr/bin/id "$@"\n' > /tmp/fakeid/id && chmod +x /tmp/fakeid/id`)
	envs := map[string]string{"PATH": "/tmp/fakeid:/usr/bin:/bin"}
	out, errOut, code := c.run(t, &process.ProcessConfig{Cmd: "/bin/bash", Envs: envs,
		Args: []string{"-l", "-c", `echo "$PATH"; [ -e /tmp/fakeid/started ] && echo started; type -t id; id -u; id -u -n`}})
	want := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nfile\n0\nroot\n"
	if out != want || errOut != "" || code != 0 {
		t.Errorf("bash -l -c printed %q, stderr %q, exit %d; want %q: root's PATH from /etc/profile, no id started by it, the real id after it", out, errOut, code, want)
	}
}

// TestCommandScript: what CommandScript gives msb bench e2b to run
// natively is the command Start runs for commands.run, and only the
// SDK's form of it.
func TestCommandScript(t *testing.T) {
	cfg := &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo hi"}}
	got := CommandScript("echo hi")
	if req := (&proc{config: cfg}).request(); req.Command != got || req.Cwd != "" || len(req.Env) != 0 {
		t.Errorf("Start runs %+v for commands.run(\"echo hi\"), CommandScript gives %q", req, got)
	}
	if !strings.HasPrefix(got, "BASH_ARGV0=/bin/bash; ") || !strings.HasSuffix(got, "echo hi") {
		t.Errorf("CommandScript(\"echo hi\") = %q, want the login shell's profile before the command", got)
	}
}
