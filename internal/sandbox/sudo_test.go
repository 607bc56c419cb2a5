package sandbox

import (
	"strings"
	"testing"
)

// testSudo: with Config.Sudo, sudo (the init binary bound there) has the
// supervisor start a command as root, or as the user it names, in the
// same sandbox, on the caller's stdio, under sudo's environment rules,
// with its exit status; a process that dropped to another user gets root
// back through it although it runs with no_new_privs. Without Config.Sudo
// the path is not there.
func testSudo(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true, Sudo: "/opt/msb/bin/sudo", Env: []string{"PATH=/opt/msb/bin:/usr/bin:/bin"}})
	for cmd, want := range map[string]string{
		"sudo id -u":                                   "0\n",
		"echo piped | sudo cat":                        "piped\n",
		"sudo sh -c 'echo to-stderr >&2' 2>&1":         "to-stderr\n",
		"sudo sh -c 'exit 7'; echo $?":                 "7\n",
		"FOO=1 sudo sh -c 'echo \"[$FOO]\"'":           "[]\n",
		"FOO=1 sudo -E sh -c 'echo \"[$FOO]\"'":        "[1]\n",
		"sudo -n BAR=2 sh -c 'echo $BAR'":              "2\n",
		"sudo -u root -- sh -c 'echo $SUDO_UID $USER'": "0 root\n",
		"cd /tmp && sudo pwd":                          "/tmp\n",
		"mkdir -p /root && sudo -i pwd":                "/root\n",
		"sudo -s -- echo '$HOME' 'a b'":                "/root a b\n",
	} {
		if got := mustOK(t, sb, cmd); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	for cmd, want := range map[string]string{
		"sudo no-such-command":     "sudo: no-such-command: command not found",
		"sudo -D /nowhere true":    "sudo: unable to change directory to /nowhere",
		"sudo -u nobody-here true": "sudo: unknown user nobody-here",
		"sudo":                     "usage: sudo",
	} {
		if out := mustFail(t, sb, cmd+" 2>&1"); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", cmd, out, want)
		}
	}
	// A signal for sudo reaches the command; a sudo killed takes it along.
	started := "for i in $(seq 1200); do pgrep -f '^/usr/bin/sleep 31$' >/dev/null && break; sleep 0.05; done; "
	gone := "for i in $(seq 200); do pgrep -f '^/usr/bin/sleep 31$' >/dev/null || break; sleep 0.05; done; pgrep -cf '^/usr/bin/sleep 31$'"
	if out := mustOK(t, sb, "exec 2>/dev/null; sudo sleep 31 & "+started+"kill -TERM %1; wait %1; echo $?"); out != "143\n" {
		t.Errorf("sudo sleep given SIGTERM: %q, want 143", out)
	}
	if out := mustFail(t, sb, "exec 2>/dev/null; sudo sleep 31 & "+started+"kill -KILL %1; wait %1; "+gone); out != "0\n" {
		t.Errorf("a sudo killed while its command runs left %q of its commands, want none", out)
	}
	if !rt.rootless { // a rootless sandbox maps root alone: no other user to come back from
		got := mustOK(t, sb, "setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'id -u; sudo id -u; sudo -u \"#1000\" id -u; sudo -g \"#5\" id -g; sudo touch /root/made-by-sudo' && ls /root")
		if got != "1000\n0\n1000\n5\nmade-by-sudo\n" {
			t.Errorf("uid 1000 with no_new_privs through sudo: %q, want 1000, 0, 1000, group 5 and a file made in /root", got)
		}
	}
	plain := create(t, rt, Config{HostBase: true})
	if out := mustFail(t, plain, "ls /opt/msb/bin/sudo 2>&1"); !strings.Contains(out, "No such file") {
		t.Errorf("a sandbox without Config.Sudo has %q", out)
	}
}
