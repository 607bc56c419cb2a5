package sudo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParse: sudo's command lines as the client reads them.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the options, or the error
	}{
		{[]string{"id"}, "u=root E=false cmd=[id]"},
		{[]string{"-u", "user", "id", "-u"}, "u=user E=false cmd=[id -u]"},
		{[]string{"-uuser", "-E", "--", "-x"}, "u=user E=true cmd=[-x]"},
		{[]string{"-nEu", "#1000", "FOO=1", "B_2=", "env"}, "u=#1000 E=true assign=[FOO=1 B_2=] cmd=[env]"},
		{[]string{"--user=root", "--preserve-env=A,B", "x"}, "u=root E=false keep=[A B] cmd=[x]"},
		{[]string{"--preserve-env", "x"}, "u=root E=true cmd=[x]"},
		{[]string{"-i"}, "u=root E=false i cmd=[]"},
		{[]string{"-s", "echo", "1=x"}, "u=root E=false s cmd=[echo 1=x]"},
		{[]string{"-v"}, "done"},
		{[]string{}, "error: no command given"},
		{[]string{"-u"}, "error: option -u requires an argument"},
		{[]string{"-Z", "x"}, "error: invalid option -- 'Z'"},
		{[]string{"--frob", "x"}, "error: unknown option --frob"},
		{[]string{"-b", "x"}, "error: option -b (run in the background) is not supported in an msb sandbox: end the command with &"},
		{[]string{"-r", "role", "x"}, "error: option -r (another user's timestamp, SELinux) is not supported in an msb sandbox"},
	} {
		o, err := parse(tc.args)
		got := fmt.Sprintf("u=%s E=%v", o.user, o.keepEnv)
		if o.keepList != nil {
			got += fmt.Sprintf(" keep=%v", o.keepList)
		}
		if o.assign != nil {
			got += fmt.Sprintf(" assign=%v", o.assign)
		}
		if o.login {
			got += " i"
		}
		if o.shell {
			got += " s"
		}
		got += fmt.Sprintf(" cmd=%v", o.cmd)
		switch {
		case err != nil:
			got = "error: " + err.Error()
		case o.done:
			got = "done"
		}
		if got != tc.want {
			t.Errorf("sudo %q: %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestEscape: a command for a shell's -c, escaped as sudo escapes it
// for -i and -s.
func TestEscape(t *testing.T) {
	if got, want := escape([]string{"echo", "$HOME", "a b", "it's;x"}), `echo $HOME a\ b it\'s\;x`; got != want {
		t.Errorf("escape: %s, want %s", got, want)
	}
}

// TestEnv: the command's environment under env_reset, -E, -i and
// --preserve-env.
func TestEnv(t *testing.T) {
	caller := []string{"FOO=1", "TERM=xterm", "LC_ALL=C", "HOME=/home/user", "PATH=/mine", "SUDO_USER=x", "BASH_FUNC_f%%=() { :; }"}
	target := account{name: "root", uid: 0, gid: 0, home: "/root", shell: "/bin/bash"}
	for _, tc := range []struct {
		o    options
		want []string // NAME=value entries the environment has
		not  []string // names it lacks
	}{
		{options{}, []string{"TERM=xterm", "LC_ALL=C", "HOME=/root", "PATH=" + securePath, "USER=root", "SHELL=/bin/bash"}, []string{"FOO"}},
		{options{keepEnv: true}, []string{"FOO=1", "HOME=/home/user", "PATH=" + securePath, "USER=root"}, []string{"SHELL", "BASH_FUNC_f%%"}},
		{options{keepEnv: true, login: true}, []string{"HOME=/root"}, []string{"FOO"}},
		{options{keepList: []string{"FOO"}}, []string{"FOO=1", "HOME=/root"}, nil},
		{options{assign: []string{"FOO=2", "PATH=/x"}}, []string{"FOO=2", "PATH=/x"}, nil},
	} {
		env := tc.o.env(target, caller, []string{"/usr/bin/id"})
		for _, w := range tc.want {
			if !slices.Contains(env, w) {
				t.Errorf("%+v: the environment %q lacks %s", tc.o, env, w)
			}
		}
		for _, n := range append(tc.not, "SUDO_USER=x") {
			for _, kv := range env {
				if kv == n || strings.HasPrefix(kv, n+"=") && !strings.Contains(n, "=") {
					t.Errorf("%+v: the environment has %s", tc.o, kv)
				}
			}
		}
		if !slices.Contains(env, "SUDO_COMMAND=/usr/bin/id") {
			t.Errorf("%+v: no SUDO_COMMAND in %q", tc.o, env)
		}
	}
}
