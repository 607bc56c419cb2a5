package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// resetSelf prints what a reset keeps of a sandbox: its namespaces (as
// inodes), its mount points and its host name.
const resetSelf = `readlink /proc/self/ns/net /proc/self/ns/mnt /proc/self/ns/pid /proc/self/ns/uts; hostname
awk '{print $5}' /proc/self/mountinfo | sort
awk '$5 == "/tmp" || $5 == "/dev/shm" {print $5, $6, $(NF-2), $NF}' /proc/self/mountinfo`

// holdPwdLock takes the lock of lckpwdf(3), /etc/.pwd.lock, until the
// returned function or the test's end, so that the host's /etc/gshadow
// is not replaced meanwhile: a host-base sandbox masks it with a bind of
// /dev/null, which the rename of useradd or groupadd (or of
// testMaskAfterHostRename, in another test process) detaches in every
// namespace, and a mount list compared across it differs (TestReset
// failed so once in a full run). The lock is an open file description's,
// which conflicts with the process-owned one shadow's tools take, also
// in this process. Where the file cannot be opened (not root) or the
// lock is not had in 30 s, the test goes on without it.
func holdPwdLock(t *testing.T) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile("/etc/.pwd.lock", os.O_WRONLY|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		t.Logf("comparing mount lists without /etc/.pwd.lock: %v", err)
		return func() {}
	}
	unlock = sync.OnceFunc(func() { f.Close() }) // releases the lock
	t.Cleanup(unlock)
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return unlock
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) || time.Now().After(end) {
			t.Logf("comparing mount lists without /etc/.pwd.lock: %v", err)
			return unlock
		}
	}
}

// resetLingerer names the process TestReset leaves running for a reset
// to kill.
const resetLingerer = "msb-reset-lingerer"

// TestReset puts a running sandbox on other layers in place, with and
// without a bounded disk: the supervisor (init's pid), namespaces, mounts
// (a bind of the host's among them) and host name stay; the files written
// since, /tmp's among them, and every process but the supervisor are
// gone; the disk limit still holds, for / and /dev/shm together (/tmp is
// a directory of the root: testTmpOnRoot). A rootless
// runtime does the same through nsenter (TestResetRootless) on a kernel
// from 6.15, and refuses without nsenter or on an older kernel, changing
// nothing.
func TestReset(t *testing.T) {
	rt := testRuntime(t)
	base, top := t.TempDir(), t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	os.WriteFile(filepath.Join(base, "f"), []byte("base\n"), 0o644)
	os.WriteFile(filepath.Join(top, "f"), []byte("top\n"), 0o644)
	for _, tc := range []struct {
		name  string
		limit Limits
	}{{"HostUpper", Limits{}}, {"Disk", Limits{DiskBytes: 64 << 20}}} {
		t.Run(tc.name, func(t *testing.T) {
			sb := create(t, rt, Config{HostBase: true, Layers: []string{base}, Limits: tc.limit,
				Binds: []Bind{{Source: top, Target: "/mnt/top", ReadOnly: true}}})
			if rt.Rootless() {
				path := os.Getenv("PATH")
				os.Setenv("PATH", t.TempDir())
				err := sb.CanReset()
				os.Setenv("PATH", path)
				if !errors.Is(err, ErrResetUnsupported) || !strings.Contains(err.Error(), "nsenter") {
					t.Errorf("a rootless reset without nsenter on PATH: %v, want ErrResetUnsupported naming nsenter", err)
				}
			}
			unlock := holdPwdLock(t) // until the mount lists are compared
			pid, self := sb.InitPid(), mustOK(t, sb, resetSelf)
			mustOK(t, sb, "echo new > /new && echo tmp > /tmp/t && echo shm > /dev/shm/s")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := sb.OpenSession(ctx, "bg", SessionOptions{}); err != nil {
				t.Fatal(err)
			}
			job := "(setsid /bin/bash -c 'exec -a " + resetLingerer + " sleep 1000' </dev/null >/dev/null 2>&1 &)"
			if _, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: job}); err != nil {
				t.Fatal(err)
			}
			for i := 0; countProcs(resetLingerer) == 0; i++ { // its exec may come after the command's end
				if i == 300 {
					t.Fatal("the background process never started")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if rt.Rootless() && RootlessResetKernel() != nil {
				if err := sb.Reset(ctx, Deferred{Layers: []string{base, top}}); !errors.Is(err, ErrResetUnsupported) || !strings.Contains(err.Error(), "6.15") {
					t.Fatalf("a rootless reset on a kernel before 6.15: %v, want ErrResetUnsupported naming 6.15", err)
				}
				if got := mustOK(t, sb, "cat /new"); got != "new\n" {
					t.Fatalf("a refused reset changed the files: /new is %q", got)
				}
				return
			}
			if err := sb.Reset(ctx, Deferred{Layers: []string{base, top}}); err != nil {
				t.Fatal(err)
			}
			if got := sb.InitPid(); got != pid {
				t.Errorf("init is %d after the reset, was %d", got, pid)
			}
			if got := mustOK(t, sb, resetSelf); got != self {
				t.Errorf("after the reset the sandbox sees itself as\n%s\nnot as before\n%s", got, self)
			}
			unlock()
			want := "top\ntop\n0\n"
			got := mustOK(t, sb, "cat /f /mnt/top/f; n=0; for f in /new /tmp/t /dev/shm/s; do [ -e $f ] && n=$((n+1)); done; echo $n")
			if got != want {
				t.Errorf("after the reset: %q, want %q", got, want)
			}
			if n := countProcs(resetLingerer); n != 0 {
				t.Errorf("%d processes of the sandbox outlived the reset", n)
			}
			if _, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("a session outlived the reset: %v", err)
			}
			if got := sb.Config().Layers; len(got) != 2 || got[1] != top {
				t.Errorf("config layers after the reset: %q", got)
			}
			mustOK(t, sb, "echo after > /after")
			if dir, err := sb.WritableDir(); err != nil {
				t.Error(err)
			} else if b, err := os.ReadFile(filepath.Join(dir, "after")); string(b) != "after\n" {
				t.Errorf("the writable dir %s after the reset holds /after as %q (%v)", dir, b, err)
			}
			if tc.limit.DiskBytes > 0 {
				res := sh(t, sb, "head -c 80M /dev/zero > /big")
				if res.ExitCode == 0 {
					t.Errorf("wrote 80 MiB to a disk of 64 after the reset")
				}
				mustOK(t, sb, "rm -f /big")
				// / and /dev/shm share the disk: 40 MiB each do not fit in
				// 64 (rootless: /dev/shm is on the reset's new disk tmpfs).
				res = sh(t, sb, "head -c 40M /dev/zero > /big && head -c 40M /dev/zero > /dev/shm/big")
				if res.ExitCode == 0 {
					t.Errorf("wrote 40 MiB to / and 40 to /dev/shm on a disk of 64 after the reset")
				}
				mustOK(t, sb, "rm -f /big /dev/shm/big")
				if line := mustOK(t, sb, `awk '$5 == "/" {print}' /proc/self/mountinfo`); !strings.Contains(line, "volatile") {
					t.Errorf("the new root on the sandbox's disk is not volatile as the old one was: %s", line)
				}
			}
			// Again, to no layers (the host's dirs alone), then back to the base.
			if err := sb.Reset(ctx, Deferred{}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "test -e /f || echo none"); got != "none\n" {
				t.Errorf("after the reset to no layers: %q", got)
			}
			if err := sb.Reset(ctx, Deferred{Layers: []string{base}}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "cat /f; echo "+strconv.Itoa(sb.InitPid())); got != "base\n"+strconv.Itoa(pid)+"\n" {
				t.Errorf("after the second reset: %q", got)
			}
		})
	}
}

// TestResetRootless reruns TestReset, TestResetKeepsSession,
// TestResetHoldsKeptShell and TestResetPrepared as an unprivileged user.
func TestResetRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestReset(KeepsSession|HoldsKeptShell|Prepared)?$")
}

// TestResetPrepared: rootless, PrepareReset starts the reset-root stage
// (nsenter, counted by a wrapper on PATH) when it is called, and the
// reset that follows starts none: it puts the sandbox on the new layers,
// keeping the unused session's shell, with the stage started ahead. A
// stage ahead that was killed is replaced by one started on the reset's
// path; one that no reset took ends with its sandbox. In root mode,
// where msb mounts itself, PrepareReset starts nothing and no reset runs
// nsenter.
func TestResetPrepared(t *testing.T) {
	rt := testRuntime(t)
	if rt.Rootless() && RootlessResetKernel() != nil {
		t.Skip(RootlessResetKernel())
	}
	real, err := exec.LookPath("nsenter")
	if err != nil {
		privtest.Skip(t, "no nsenter: %v", err)
	}
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	log := filepath.Join(bin, "starts")
	script := "#!/bin/sh\necho $$ >> " + log + "\nexec " + real + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(bin, "nsenter"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	starts := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	base, top := t.TempDir(), t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	os.WriteFile(filepath.Join(top, "f"), []byte("top\n"), 0o644)
	sb := create(t, rt, Config{HostBase: true, Layers: []string{base}, Limits: Limits{DiskBytes: 64 << 20}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ahead := 0 // stages started ahead so far
	prepare := func() *resetStage {
		t.Helper()
		if err := sb.PrepareReset(); err != nil {
			t.Fatal(err)
		}
		st, ok := stagesAhead.Load(sb)
		if ok != rt.Rootless() {
			t.Fatalf("PrepareReset left a stage: %v, want %v", ok, rt.Rootless())
		}
		if !ok {
			return nil
		}
		ahead++
		return st.(*resetStage)
	}
	check := func(when string, want int) {
		t.Helper()
		if !rt.Rootless() {
			want = 0
		}
		// A stage started ahead may not have run the wrapper yet.
		for i := 0; starts() < want && i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if n := starts(); n != want {
			t.Fatalf("%s: nsenter started %d times, want %d", when, n, want)
		}
	}

	if err := sb.OpenSession(ctx, "spare", SessionOptions{Dir: "/"}); err != nil {
		t.Fatal(err)
	}
	prepare()
	check("after PrepareReset", 1)
	mustOK(t, sb, "echo old > /old")
	kept, err := sb.ResetKeeping(ctx, Deferred{Layers: []string{base, top}}, "spare")
	if err != nil || !kept {
		t.Fatalf("a reset with its stage started ahead: kept %v, %v", kept, err)
	}
	check("after the reset", 1)
	if adopted, err := sb.AdoptSession(ctx, "main", "spare", SessionOptions{}); err != nil || !adopted {
		t.Fatalf("the kept shell adopted: %v, %v", adopted, err)
	}
	if got := mustOK(t, sb, "cat /f; ls /old 2>&1 >/dev/null | wc -l"); got != "top\n1\n" {
		t.Fatalf("after the reset: %q", got)
	}

	st := prepare()
	check("after a second PrepareReset", 2)
	if st != nil {
		st.cmd.Process.Kill()
		<-st.done
	}
	mustOK(t, sb, "echo old > /old")
	if err := sb.Reset(ctx, Deferred{Layers: []string{base}}); err != nil {
		t.Fatalf("a reset whose stage ahead was killed: %v", err)
	}
	check("after the reset whose stage ahead was killed", 3)
	if got := mustOK(t, sb, "test -e /f || echo none; ls /old 2>&1 >/dev/null | wc -l"); got != "none\n1\n" {
		t.Fatalf("after the reset whose stage ahead was killed: %q", got)
	}

	st = prepare()
	check("after a third PrepareReset", 4)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if st == nil {
		return
	}
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the stage started ahead (pid %d) outlived its sandbox by 10 s", st.cmd.Process.Pid)
	}
	// PrepareReset's watcher lets go of the stage after done is closed.
	for i := 0; i < 100; i++ {
		if _, ok := stagesAhead.Load(sb); !ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Error("a closed sandbox's stage is still held 5 s after its exit")
}

// resetSudoUser is what TestResetSudo has a user other than root run:
// sudo to root, to itself back, and a file made where only root writes.
const resetSudoUser = `setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'id -u; sudo id -u; sudo -u "#1000" id -u; sudo touch /made-by-sudo' && stat -c %u /made-by-sudo && rm /made-by-sudo`

// TestResetSudo: a sandbox with Config.Sudo keeps a working sudo across
// resets (the supervisor listens on a new socket in the new root's /dev):
// a user other than root gets root through it after each of two resets,
// and so does a shell on a terminal after them, in the new pty sudo gives
// its command. Root mode only: a rootless sandbox maps root alone, with
// no uid 1000 to come from (TestResetRootless resets rootless).
func TestResetSudo(t *testing.T) {
	rt := testRuntime(t)
	if rt.Rootless() {
		t.Skip("a rootless sandbox maps root alone: no uid 1000 to sudo from (TestResetRootless resets rootless)")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Mkdir(filepath.Join(base, "root"), 0o700) // sudo -i's home
	master, slave := openTestPty(t)
	defer master.Close()
	defer slave.Close()
	makeRaw(t, slave)
	sb := create(t, rt, Config{HostBase: true, Layers: []string{base}, Sudo: "/opt/msb/bin/sudo",
		Env: []string{"PATH=/opt/msb/bin:/usr/bin:/bin"}, Stdio: &Stdio{In: slave, Out: slave, Err: slave}})
	const want = "1000\n0\n1000\n0\n"
	if got := mustOK(t, sb, resetSudoUser); got != want {
		t.Fatalf("sudo as uid 1000 before any reset: %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 1; i <= 2; i++ {
		if err := sb.Reset(ctx, Deferred{Layers: []string{base}}); err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
		if got := mustOK(t, sb, resetSudoUser); got != want {
			t.Errorf("sudo as uid 1000 after reset %d: %q, want uid 1000, root, uid 1000 and a file of root's", i, got)
		}
	}
	done := make(chan error, 1)
	go func() {
		code, err := sb.Shell(context.Background(), []string{"/bin/bash", "--norc", "-i"}, 30, 100)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		done <- err
	}()
	term := newTermScript(t, master)
	term.send(`PS1='\u-ready> '`)
	term.send(`o=$(tty); i=$(setpriv --reuid 1000 --regid 1000 --clear-groups sudo sh -c 'echo $(id -u)-$(tty)'); echo "tty-$((1))[$o][$i]"`)
	got := term.expect("tty-1[", "]\r")
	if f := strings.Split(got, "]["); len(f) != 2 || !strings.HasPrefix(f[1], "0-/dev/pts/") || "0-"+f[0] == f[1] {
		t.Errorf("the shell's tty and uid 1000's sudo's uid and tty after the resets: %s, want root on another pty", got)
	}
	term.send("sudo -i")
	term.send(`echo "in-$((2)) $(id -u) $PWD"; exit 3`)
	if got := term.expect("in-2 ", "\r"); got != "0 /root" {
		t.Errorf("sudo -i on a terminal after the resets read %q, want 0 /root", got)
	}
	term.expect("root-ready> ", "") // a line typed sooner would be sudo -i's, as with sudo
	term.send(`echo "rc-$((3))=$?"; exit 0`)
	term.expect("rc-3=3", "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the shell: %v; output %q", err, term.all())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the shell did not exit; output %q", term.all())
	}
}

// TestResetBesideSessionOpens: sessions opened while resets run either
// open before a reset (which then closes them) or after it, in the new
// root; none fails because its named pipes' dir moved away under it (the
// supervisor holds session opens back during a reset, as file
// operations), and one opened after the last reset works.
func TestResetBesideSessionOpens(t *testing.T) {
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true})
	if err := sb.CanReset(); err != nil {
		t.Skipf("this runtime cannot reset in place (TestReset checks why): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := "s" + strconv.Itoa(i)
			if err := sb.OpenSession(ctx, name, SessionOptions{}); err != nil {
				errs <- fmt.Errorf("opening session %s beside the resets: %w", name, err)
				return
			}
			if err := sb.CloseSession(ctx, name); err != nil && !errors.Is(err, ErrNotFound) {
				errs <- fmt.Errorf("closing session %s: %w", name, err)
				return
			}
		}
	}()
	for i := 0; i < 20; i++ {
		if err := sb.Reset(ctx, Deferred{}); err != nil {
			close(stop)
			t.Fatalf("reset %d: %v", i, err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := sb.OpenSession(ctx, "after", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.SessionExec(ctx, "after", session.ExecRequest{Command: "echo ok"}); err != nil || got.Output != "ok\n" {
		t.Fatalf("a session opened after the resets: %+v, %v", got, err)
	}
}

// resetSandbox is a host-base sandbox of a test of resets over the
// empty layer base (top holds f, "top"), with a disk limit; it skips
// where the kernel lets a rootless runtime reset nothing.
func resetSandbox(t *testing.T) (sb *Sandbox, base, top string) {
	t.Helper()
	rt := testRuntime(t)
	if rt.Rootless() && RootlessResetKernel() != nil {
		t.Skip(RootlessResetKernel())
	}
	base, top = t.TempDir(), t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	os.WriteFile(filepath.Join(top, "f"), []byte("top\n"), 0o644)
	return create(t, rt, Config{HostBase: true, Layers: []string{base}, Limits: Limits{DiskBytes: 64 << 20}}), base, top
}

// TestResetKeepsSession resets a host-base sandbox keeping an unused
// session's shell (ResetKeeping) and opens a session with it
// (AdoptSession): the shell that answers is the one started before the
// reset, in the new root, with the new session's cwd and variables; a
// session that ran a command, and one whose working directory is not the
// root, are not kept. The same rootless (TestResetRootless), where the
// reset-root stage leaves the kept shell's pipes as msb's mount thread
// does.
func TestResetKeepsSession(t *testing.T) {
	sb, base, top := resetSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each refused session is opened right before its reset: a reset
	// that keeps none closes every session.
	for _, s := range []struct{ name, dir, command string }{{"used", "/", "true"}, {"elsewhere", "/tmp", ""}} {
		if err := sb.OpenSession(ctx, s.name, SessionOptions{Dir: s.dir, Env: []string{"ROLE=" + s.name}}); err != nil {
			t.Fatal(err)
		}
		if s.command != "" {
			if _, err := sb.SessionExec(ctx, s.name, session.ExecRequest{Command: s.command}); err != nil {
				t.Fatal(err)
			}
		}
		kept, err := sb.ResetKeeping(ctx, Deferred{Layers: []string{base}}, s.name)
		if err != nil || kept {
			t.Fatalf("a reset keeping session %q: kept %v, %v; want not kept", s.name, kept, err)
		}
	}
	if err := sb.OpenSession(ctx, "spare", SessionOptions{Dir: "/", Env: []string{"ROLE=spare"}}); err != nil {
		t.Fatal(err)
	}
	shells := sessionShells(t, sb.InitPid())
	mustOK(t, sb, "echo old > /old")
	kept, err := sb.ResetKeeping(ctx, Deferred{Layers: []string{base, top}}, "spare")
	if err != nil {
		t.Fatal(err)
	}
	if !kept {
		t.Fatal("the unused spare's shell was not kept")
	}
	adopted, err := sb.AdoptSession(ctx, "main", "spare", SessionOptions{Dir: "/tmp", Env: []string{"ROLE=main"}})
	if err != nil {
		t.Fatal(err)
	}
	if adopted != kept {
		t.Errorf("the kept shell adopted: %v, want %v", adopted, kept)
	}
	res, err := sb.SessionExec(ctx, "main", session.ExecRequest{Command: `echo "$$ $ROLE $PWD $(cat /f) $(ls /old 2>&1 >/dev/null | wc -l)"`})
	if err != nil {
		t.Fatal(err)
	}
	pid, _, _ := strings.Cut(res.Output, " ")
	if want := " main /tmp top 1\n"; !strings.HasSuffix(res.Output, want) {
		t.Errorf("the new session after the reset: %q, want pid and %q", res.Output, want)
	}
	if (pid == shells["spare"]) != kept {
		t.Errorf("the new session's shell is %s, the spare's was %s (kept: %v)", pid, shells["spare"], kept)
	}
	if _, err := sb.SessionExec(ctx, "spare", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("the spare session is still there after its adoption: %v", err)
	}
}

// TestResetHoldsKeptShell: a command sent to the session whose shell a
// reset keeps, between the reset's OpReset and OpResetDone, waits for
// OpResetDone, as every other process and file operation does, and then
// runs in that shell. (It ran at once, in a root half replaced: "bash:
// setsid: command not found" in a scratch loop of ResetKeeping beside
// such commands, which reported the shell kept and unused.)
func TestResetHoldsKeptShell(t *testing.T) {
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true})
	if err := sb.CanReset(); err != nil {
		t.Skipf("this runtime cannot reset in place (TestReset checks why): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.OpenSession(ctx, "spare", SessionOptions{Dir: "/"}); err != nil {
		t.Fatal(err)
	}
	resp, err := sb.conn.call(ctx, &wire.Request{Op: wire.OpReset, Session: "spare"})
	if err != nil || len(resp.Data) == 0 {
		sb.resetDone()
		t.Fatalf("a reset keeping the unused session's shell: %q, %v", resp.Data, err)
	}
	type result struct {
		out string
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := sb.SessionExec(ctx, "spare", session.ExecRequest{Command: "echo ran"})
		ran <- result{res.Output, err}
	}()
	select {
	case r := <-ran:
		sb.resetDone()
		t.Fatalf("a command in the kept shell answered during the reset: %q, %v", r.out, r.err)
	case <-time.After(time.Second): // held back, as it should be
	}
	if err := sb.resetDone(); err != nil {
		t.Fatal(err)
	}
	if r := <-ran; r.err != nil || r.out != "ran\n" {
		t.Fatalf("the command held back by the reset: %q, %v", r.out, r.err)
	}
}

// sessionShells maps the ROLE each session shell of the sandbox whose
// init is initPid was started with to its pid in the sandbox.
func sessionShells(t testing.TB, initPid int) map[string]string {
	t.Helper()
	out := map[string]string{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		status, err := os.ReadFile("/proc/" + p.Name() + "/status")
		if err != nil || !strings.Contains(string(status), "\nPPid:\t"+strconv.Itoa(initPid)+"\n") {
			continue
		}
		env, _ := os.ReadFile("/proc/" + p.Name() + "/environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			if role, ok := strings.CutPrefix(kv, "ROLE="); ok {
				for _, l := range strings.Split(string(status), "\n") {
					if ns, ok := strings.CutPrefix(l, "NSpid:"); ok {
						f := strings.Fields(ns)
						out[role] = f[len(f)-1]
					}
				}
			}
		}
	}
	if out["spare"] == "" {
		t.Fatalf("no shell of the spare session under init %d: %v", initPid, out)
	}
	return out
}
