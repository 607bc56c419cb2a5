package sbinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/wire"
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
// sudo socket too.
func (s *supervisor) reset() error {
	s.mu.Lock()
	if s.resetting {
		s.mu.Unlock()
		return fail(wire.CodeInvalid, "a reset is under way already")
	}
	s.resetting = true
	s.mu.Unlock()
	s.files.Lock()
	s.spawn.pause()
	s.closeAll()
	if s.sudoLn != nil {
		s.sudoLn.Close()
		s.sudoLn = nil
	}
	return killOthers(killWait)
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

// killOthers kills every process of the PID namespace but PID 1 until
// none is left (each round again: one may have forked meanwhile), reaping
// the orphans; the supervisor's own children are reaped by their waits.
func killOthers(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		unix.Kill(-1, unix.SIGKILL)
		reapOrphans()
		left := othersLeft()
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the sandbox still there %s after SIGKILL", left, wait)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// othersLeft counts the processes of the PID namespace other than PID 1,
// zombies included.
func othersLeft() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 {
			n++
		}
	}
	return n
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
