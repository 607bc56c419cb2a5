package sbinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// A reset puts a new root under a live sandbox (sandbox.Sandbox.Reset):
// the supervisor ends every other process (OpReset), the host, which
// alone may mount (rootless: its reset-root stage, StageResetRoot),
// builds the new root in the sandbox's mount namespace and pivots into
// it, which moves the supervisor's root and working directory there too,
// and the supervisor takes up the new root (OpResetDone). The supervisor
// stays: its pid, namespaces, cgroups and control socket are the
// sandbox's before and after.

// killWait bounds how long a reset waits for the sandbox's processes to
// be gone after SIGKILL: a process stuck in the kernel (D state) keeps
// the reset from going on, and the host then replaces the sandbox.
const killWait = 10 * time.Second

// reset ends every process of the sandbox but PID 1 and holds back new
// ones and file operations until resetDone: its sessions are closed, the
// sudo socket too. Session keep, when its shell ran no command and
// holds nothing of the old root but its root and working directory
// (keepable), is not: its shell lives on, and the answer names the
// session's pipes in wire.SessionDir, which the host's reset leaves
// there (pivot_root moves the shell into the new root).
func (s *supervisor) reset(keep string) (wire.Response, error) {
	s.mu.Lock()
	if s.resetting {
		s.mu.Unlock()
		return wire.Response{}, fail(wire.CodeInvalid, "a reset is under way already")
	}
	s.resetting = true
	s.mu.Unlock()
	s.files.Lock()
	s.spawn.pause()
	sess, pid, chans := s.keptShell(keep)
	if sess == nil {
		keep = ""
	}
	s.closeAllBut(keep)
	if s.sudoLn != nil {
		s.sudoLn.Close()
		s.sudoLn = nil
	}
	if err := killOthers(killWait, pid); err != nil {
		return wire.Response{}, err
	}
	if sess == nil {
		return wire.Response{}, nil
	}
	if _, _, unused := sess.ShellState(); !unused { // a command came meanwhile
		s.closeAll()
		return wire.Response{}, nil
	}
	return wire.Response{Data: []byte(strings.Join(chans, "\n"))}, nil
}

// keptShell is session name, its shell's pid and its pipes' names when a
// reset can keep it (keepable), else nil.
func (s *supervisor) keptShell(name string) (*session.Session, int, []string) {
	if name == "" {
		return nil, 0, nil
	}
	s.mu.Lock()
	sess, ok := s.liveSession(name)
	asked := len(s.running[name]) > 0 // a command on its way in (sessionExec)
	s.mu.Unlock()
	if !ok || asked {
		return nil, 0, nil
	}
	pid, chans, unused := sess.ShellState()
	if !unused || keepable(pid) != nil {
		return nil, 0, nil
	}
	return sess, pid, chans
}

// keepable says why process pid cannot be kept across a new root, or
// nil: its root and working directory must be the root itself, which
// pivot_root moves, and every file it maps or holds open must be on
// another mount than the root (a host base's shell: its binary and
// libraries on the host's dirs, its terminal and pipes in /dev), so that
// it holds, and read at its start, nothing of the old root's files.
func keepable(pid int) error {
	proc := "/proc/" + strconv.Itoa(pid)
	var root unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, "/", 0, unix.STATX_MNT_ID|unix.STATX_INO, &root); err != nil {
		return err
	}
	for _, d := range []string{"root", "cwd"} {
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, proc+"/"+d, 0, unix.STATX_MNT_ID|unix.STATX_INO, &st); err != nil {
			return err
		}
		if st.Mnt_id != root.Mnt_id || st.Ino != root.Ino || st.Dev_major != root.Dev_major || st.Dev_minor != root.Dev_minor {
			return fmt.Errorf("its %s is not the root", d)
		}
	}
	maps, err := os.ReadFile(proc + "/maps")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
			continue // anonymous, [heap], [stack], [vdso]
		}
		if err := offRoot(f[5], f[3], f[4], root.Mnt_id); err != nil {
			return fmt.Errorf("it maps %s: %w", f[5], err)
		}
	}
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return err
	}
	for _, fd := range fds {
		info, err := os.ReadFile(proc + "/fdinfo/" + fd.Name())
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(l, "mnt_id:"); ok && strings.TrimSpace(v) == strconv.FormatUint(root.Mnt_id, 10) {
				return fmt.Errorf("its descriptor %s is on the root", fd.Name())
			}
		}
	}
	return nil
}

// offRoot says why the file at path, mapped from device dev (major:minor
// in hex) inode ino, may be the root's, or nil: path names that very
// file, on another mount than the root's (rootMnt).
func offRoot(path, dev, ino string, rootMnt uint64) error {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID|unix.STATX_INO, &st); err != nil {
		return err
	}
	maj, min, _ := strings.Cut(dev, ":")
	major, err1 := strconv.ParseUint(maj, 16, 32)
	minor, err2 := strconv.ParseUint(min, 16, 32)
	if err1 != nil || err2 != nil || major != uint64(st.Dev_major) || minor != uint64(st.Dev_minor) || strconv.FormatUint(st.Ino, 10) != ino {
		return errors.New("another file has its path")
	}
	if st.Mnt_id == rootMnt {
		return errors.New("it is on the root")
	}
	return nil
}

// resetDone takes up the root the host put under the sandbox: the file
// operations' root descriptor, the working directory and the sudo socket
// made in it; then processes start and file operations go on again. It is sent after every reset,
// also one that failed, which it then only ends.
func (s *supervisor) resetDone() error {
	s.mu.Lock()
	if !s.resetting {
		s.mu.Unlock()
		return fail(wire.CodeInvalid, "no reset is under way")
	}
	s.resetting = false
	s.mu.Unlock()
	defer s.files.Unlock()
	defer s.spawn.resume()
	if err := reopenRoot(); err != nil {
		return err
	}
	if s.cfg.Workdir != "" {
		if err := os.MkdirAll(s.cfg.Workdir, 0o755); err != nil {
			return fmt.Errorf("creating workdir %s in the new root: %w", s.cfg.Workdir, err)
		}
	}
	if s.cfg.Sudo {
		l, err := listenSudo()
		if err != nil {
			return err
		}
		s.sudoLn = l
		go s.serveSudo(l)
	}
	return nil
}

// killOthers kills every process of the PID namespace but PID 1 (and
// keep, when not 0) until none is left (each round again: one may have
// forked meanwhile), reaping the orphans; the supervisor's own children
// are reaped by their waits.
func killOthers(wait time.Duration, keep int) error {
	deadline := time.Now().Add(wait)
	for {
		if keep == 0 {
			unix.Kill(-1, unix.SIGKILL)
		} else {
			forOthers(keep, func(pid int) { unix.Kill(pid, unix.SIGKILL) })
		}
		reapOrphans()
		left := 0
		forOthers(keep, func(int) { left++ })
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the sandbox still there %s after SIGKILL", left, wait)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// forOthers calls f with each process of the PID namespace other than
// PID 1 and keep, zombies included.
func forOthers(keep int, f func(pid int)) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 && pid != keep {
			f(pid)
		}
	}
}

// reopenRoot points the file operations' root descriptor at the root
// the process has now: the new descriptor takes the old one's number, so
// an operation in flight uses either root, never a number reused for
// something else. The old root's last reference, a copy of the old
// descriptor, is dropped after the answer: the overlay's unmount (a sync
// of the disk under its upper dir) is then off the reset's path.
func reopenRoot() error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the new sandbox root: %w", err)
	}
	if rootFd == unix.AT_FDCWD {
		rootFd = fd
		return nil
	}
	defer unix.Close(fd)
	old, err := unix.FcntlInt(uintptr(rootFd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("keeping the old root descriptor: %w", err)
	}
	if err := unix.Dup3(fd, rootFd, unix.O_CLOEXEC); err != nil {
		unix.Close(old)
		return fmt.Errorf("replacing the root descriptor: %w", err)
	}
	go func() {
		time.Sleep(time.Millisecond) // after the answer to OpResetDone
		unix.Close(old)
	}()
	return nil
}

// MountPointIn resolves p under root as the sandbox's root builder does
// (symlinks followed as if root were "/", missing directories made, and
// with !dir the final file), and returns an O_PATH descriptor of it: the
// host uses it to make a reset's new root (sandbox.Sandbox.Reset).
func MountPointIn(root, p string, dir bool) (int, error) { return resolveCreate(root, p, dir) }

// GiveOwnersIn gives the paths under root their owners, as init does when
// it builds the root (Config.Owners): the host calls it for a reset's new
// root.
func GiveOwnersIn(root string, owners []wire.Owner) error { return giveOwners(root, owners) }

// StageResetRoot puts a new root under a rootless sandbox (package
// sandbox's Reset): the host starts it with nsenter(1) in the sandbox's
// user namespace, where, as the namespace's root, it may mount in the
// sandbox's mount namespace, which neither the host (a threaded process
// cannot join a user namespace) nor the supervisor (no CAP_SYS_ADMIN,
// seccomp) may. What it mounts comes on its stdin and descriptors;
// package sandbox (putRootInNS) says how.
const StageResetRoot = "reset-root"

// ResetRoot is the reset-root stage's work: package sandbox sets it, and
// starts its own binary for the stage, as for the tree stage.
var ResetRoot func() error

func resetRootMain() error {
	if ResetRoot == nil {
		return errors.New("this binary has no reset-root stage: msb itself serves it")
	}
	return ResetRoot()
}
