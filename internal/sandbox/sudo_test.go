package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// testSudoTerminal: sudo run from a terminal gives its command a new one
// in a session of its own, as Debian's sudo (use_pty): tty names another
// pty, the caller's window size is copied and follows a resize, keys
// typed reach the command (sudo -i reads them), Ctrl-C signals the
// command through its terminal, sudo dies of the signal its command died
// of, Ctrl-Z stops both and fg continues both, and the caller's terminal
// is back in its mode afterwards.
func testSudoTerminal(t *testing.T, rt *Runtime) {
	master, slave := openTestPty(t)
	defer master.Close()
	defer slave.Close()
	makeRaw(t, slave) // as msb shell makes the user's terminal: Ctrl-C goes in as a byte
	sb := create(t, rt, Config{HostBase: true, Sudo: "/opt/msb/bin/sudo", Env: []string{"PATH=/opt/msb/bin:/usr/bin:/bin"},
		Stdio: &Stdio{In: slave, Out: slave, Err: slave}})
	mustOK(t, sb, "mkdir -p /root && printf '%s\\n' 'trap \"echo int-caught; exit 9\" INT' 'echo ready-for-int' 'while :; do sleep 0.05; done' >/tmp/int.sh")
	done := make(chan error, 1)
	go func() {
		code, err := sb.Shell(context.Background(), []string{"/bin/bash", "--norc", "-i"}, 30, 100)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		done <- err
	}()
	term := newTermScript(t, master)
	// Markers are made by the shell ($((n))), so the terminal's echo of
	// the typed line never matches them.
	term.send(`PS1='\u-ready> '`)
	term.send(`o=$(tty); i=$(sudo tty); s=$(sudo stty size); echo "tty-$((1))[$o][$i][$s]"`)
	got := term.expect(`tty-1[`, "]\r")
	if f := strings.Split(strings.Trim(got, "[]"), "]["); len(f) != 3 || !strings.HasPrefix(f[1], "/dev/pts/") || f[0] == f[1] || f[2] != "30 100" {
		t.Errorf("the caller's tty, sudo's command's and its size: %s, want two ptys and 30 100", got)
	}
	term.send(`a=$(stty -g); sudo true; [ "$a" = "$(stty -g)" ] && echo "mode-$((2))-kept"`)
	term.expect("mode-2-kept", "")
	if !rt.rootless { // su sets groups, which a rootless sandbox denies
		term.send(`sudo su - -c 'echo "su-$((20)) $(id -u) $(tty)"' | cat`) // stdout a pipe: the caller's output stays cooked
		term.expect("su-20 0 /dev/pts/", "\r\n")
		term.expect("root-ready> ", "")
	}
	term.send("sudo -i")
	// As under sudo's monitor: the session's leader is the shell's parent,
	// the shell's group is its terminal's foreground group, and the shell
	// has job control (m in $-).
	term.send(`echo "in-$((3)) $(id -u) $PWD $(cut -d' ' -f6 /proc/$$/stat) $PPID $(cut -d' ' -f5,8 /proc/$$/stat) $-"; exit 3`)
	if f := strings.Fields(term.expect("in-3 ", "\r")); len(f) != 7 || f[0] != "0" || f[1] != "/root" || f[2] != f[3] || f[4] != f[5] || !strings.Contains(f[6], "m") {
		t.Errorf("sudo -i read %q, want uid 0, /root, the session led by its parent, its group in the foreground and job control", f)
	}
	term.expect("root-ready> ", "") // keys typed while sudo runs are its command's, as with sudo
	term.send(`echo "after-$((4))=$?"`)
	term.expect("after-4=3", "")
	term.send(`sudo sh -c 'stty size | sed s/^/sz-/; while [ "$(stty size)" = "30 100" ]; do sleep 0.05; done; echo "size-$((5))=$(stty size)"'`)
	term.expect("sz-30 100", "")
	if err := sb.Resize(context.Background(), 40, 120); err != nil {
		t.Fatal(err)
	}
	term.expect("size-5=40 120", "")
	term.expect("root-ready> ", "")
	term.send(`sudo sh /tmp/int.sh; echo "rc-$((6))=$?"`)
	term.expect("ready-for-int", "")
	term.send("\x03")
	term.expect("int-caught", "")
	term.expect("rc-6=9", "")
	// sleep dies of SIGINT, and sudo of the same: bash drops the rest of
	// the line, as after a plain command killed by Ctrl-C, and says 130.
	term.send(`sudo sh -c 'echo "ready-$((7))"; exec sleep 60'; echo "not-$((8))"`)
	term.expect("ready-7", "")
	term.send("\x03")
	term.expect("root-ready> ", "") // keys typed sooner would go to sleep's terminal, as with sudo
	term.send(`echo "rc-$((9))=$?"`)
	if got := term.expect("rc-9=", "\r"); got != "130" || strings.Contains(term.all(), "not-8") {
		t.Errorf("sudo given Ctrl-C while its command ran: status %s (want 130), and the line went on: %v", got, strings.Contains(term.all(), "not-8"))
	}
	// Ctrl-Z stops the command and sudo with it, so the shell has the
	// terminal back; fg continues both, and keys reach the command again.
	term.send(`sudo sh -c 'echo "zz-$((11))"; read x; echo "got-$x"'`)
	term.expect("zz-11", "")
	term.send("\x1a")
	term.expect("root-ready> ", "")
	term.send(`echo "bg-$((12))"; jobs`)
	term.expect("bg-12", "")
	term.expect("Stopped", "")
	term.expect("root-ready> ", "")
	term.send("fg")
	term.expect(`read x; echo "got-$x"'`, "") // the shell names the job it continues
	term.send("hello")
	term.expect("got-hello", "")
	term.expect("root-ready> ", "")
	term.send(`echo "rc-$((13))=$?"`)
	term.expect("rc-13=0", "")
	// A full-screen program reads its keys from /dev/tty, the new terminal.
	term.send(`sudo less /tmp/int.sh; echo "less-$((15))=$?"`)
	term.expect("while :; do sleep 0.05; done", "")
	term.send("q")
	term.expect("less-15=0", "")
	if !rt.rootless { // a rootless sandbox maps root alone
		// uid 1000 opens the pty; it goes to the user the command runs as.
		term.send(`setpriv --reuid 1000 --regid 1000 --clear-groups sudo -u '#1001' sh -c 'echo "own-$((14)) $(id -u) $(stat -c %u $(tty))"'`)
		if got := term.expect("own-14 ", "\r"); got != "1001 1001" {
			t.Errorf("sudo -u '#1001' from uid 1000 on a terminal: uid and its terminal's owner %q, want 1001 1001", got)
		}
		term.expect("root-ready> ", "")
	}
	term.send(`[ "$a" = "$(stty -g)" ] && echo "mode-$((10))-kept"; exit 0`)
	term.expect("mode-10-kept", "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the shell: %v; output %q", err, term.all())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the shell did not exit; output %q", term.all())
	}
}

// makeRaw sets f, a terminal, as cfmakeraw does.
func makeRaw(t testing.TB, f *os.File) {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag = tio.Cflag&^(unix.CSIZE|unix.PARENB) | unix.CS8
	if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
}

// termScript types lines into a terminal's leader and waits for what the
// terminal shows.
type termScript struct {
	t      testing.TB
	master *os.File
	mu     sync.Mutex
	out    []byte
	seen   int // what expect has matched up to
}

func newTermScript(t testing.TB, master *os.File) *termScript {
	ts := &termScript{t: t, master: master}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			ts.mu.Lock()
			ts.out = append(ts.out, buf[:n]...)
			ts.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return ts
}

// send types s, and a newline unless s is a control character.
func (ts *termScript) send(s string) {
	if len(s) > 1 {
		s += "\n"
	}
	if _, err := ts.master.WriteString(s); err != nil {
		ts.t.Fatalf("typing %q: %v", s, err)
	}
}

// expect waits for the terminal to show from, after what it matched
// last, and returns what follows it up to until (when until is not
// empty); it fails after a minute (a failure, never a measure).
func (ts *termScript) expect(from, until string) string {
	ts.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ts.mu.Lock()
		rest := string(ts.out[ts.seen:])
		ts.mu.Unlock()
		if i := strings.Index(rest, from); i >= 0 {
			after := rest[i+len(from):]
			if until == "" {
				ts.seen += i + len(from)
				return ""
			}
			if j := strings.Index(after, until); j >= 0 {
				ts.seen += i + len(from) + j + len(until)
				return after[:j]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.t.Fatalf("the terminal showed no %q (then %q); it showed %q", from, until, ts.all())
	return ""
}

func (ts *termScript) all() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return string(ts.out)
}
