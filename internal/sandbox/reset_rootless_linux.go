package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// This binary serves the reset-root stage (putRootInNS starts it for that).
func init() { sbinit.ResetRoot = resetRootStage }

// haveNsenter says whether util-linux's nsenter(1) is on PATH: a rootless
// reset runs its stage through it.
func haveNsenter() bool {
	_, err := exec.LookPath("nsenter")
	return err == nil
}

// resetPlan is what the reset-root stage reads on its stdin: the new
// overlay's dirs (host paths), a newRoot (mount points only), the
// overlay's flags and, where the upper dir is on a disk tmpfs, a new
// one's options (the sandbox's /dev/shm is then a dir of it).
type resetPlan struct {
	Layers      []string
	Upper, Work string
	Mounts      []string
	Links       [][2]string
	Owners      []wire.Owner
	Chans       []string // a kept shell's pipes (newRoot.chans)
	Flags       []string
	Tmpfs       string // a new disk tmpfs's options, "": the upper dir is not on one
}

// The reset-root stage's descriptors: the sandbox's mount namespace; the
// socket on which it receives the dir holding the old writable layer's
// dirs (with its plan: a path of it may go through msb's /proc/self) and
// sends a new disk tmpfs; and a pidfd of the sandbox's init, whose exit
// ends a stage that has no plan yet (one started ahead of a reset that
// never came).
const (
	resetNSFd   = 3
	resetSockFd = 4
	resetInitFd = 5
)

// resetDiskDir is the path of the disk tmpfs of the sandbox's last reset
// (rootless), through this process's descriptor; "" if none.
func (s *Sandbox) resetDiskDir() string {
	s.confMu.Lock()
	defer s.confMu.Unlock()
	if s.resetDisk == nil {
		return ""
	}
	return "/proc/self/fd/" + strconv.Itoa(int(s.resetDisk.Fd()))
}

// likeDiskTmpfs is the options of a tmpfs like the one at dir, the
// sandbox's disk tmpfs: its size and inode count.
func likeDiskTmpfs(dir string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", fmt.Errorf("reading the size of the sandbox's disk tmpfs: %w", err)
	}
	return "mode=755,size=" + strconv.FormatUint(st.Blocks*uint64(st.Bsize), 10) + ",nr_inodes=" + strconv.FormatUint(st.Files, 10), nil
}

// PrepareReset starts, for a rootless sandbox, the process that will do
// its next reset's mounts (putRootInNS) now: nsenter(1) and this
// binary's reset-root stage, which then waits in the sandbox's user
// namespace for its plan, so that the reset starts no process on its
// path. A fork's spare is made so (its one reset is on the fork's path).
// The stage is ended when a reset takes it, a later PrepareReset replaces
// it, or the sandbox closes. In root mode, where msb mounts itself, and
// where the sandbox cannot be reset (CanReset), it does nothing.
func (s *Sandbox) PrepareReset() error {
	if !s.rt.rootless || s.CanReset() != nil {
		return nil
	}
	st, err := s.startResetStage()
	if err != nil {
		return err
	}
	if old, ok := stagesAhead.Swap(s, st); ok {
		old.(*resetStage).end()
	}
	go func() { // it ends with init (resetRootStage): no Close needed
		<-st.done
		stagesAhead.CompareAndDelete(s, st)
	}()
	return nil
}

// stagesAhead holds the stage PrepareReset started for a sandbox, by
// *Sandbox, until a reset takes it or it exits.
var stagesAhead sync.Map

// takeResetStage is the stage PrepareReset started, nil if none; the
// caller runs or ends it.
func (s *Sandbox) takeResetStage() *resetStage {
	if st, ok := stagesAhead.LoadAndDelete(s); ok {
		return st.(*resetStage)
	}
	return nil
}

// resetStage is a reset-root stage started (nsenter, then this binary in
// the sandbox's user namespace), waiting for its plan on its stdin.
type resetStage struct {
	cmd    *exec.Cmd
	plan   *os.File // the write end of its stdin
	sock   *os.File // msb's end of its socket (resetSockFd)
	stderr bytes.Buffer
	done   chan struct{} // closed once it exited; then err is its exit
	err    error
}

// errStageGone: a stage started ahead had exited before its plan came.
var errStageGone = errors.New("the reset-root stage started ahead is gone")

// startResetStage starts a reset-root stage for the sandbox.
func (s *Sandbox) startResetStage() (*resetStage, error) {
	// No context: a stage killed between its mounts and the pivot would
	// leave the sandbox half moved. --preserve-credentials: the caller's
	// id is the namespace's root; nsenter's setgroups would fail where
	// the namespace denies it.
	cmd, err := nsStage(context.Background(), s.InitPid(), sbinit.StageResetRoot, "--preserve-credentials")
	if err != nil {
		return nil, fmt.Errorf("mounting the new root in the sandbox's namespaces: %w", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(s.InitPid()) + "/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox's mount namespace: %w", err)
	}
	defer ns.Close()
	pidfd, err := unix.PidfdOpen(s.InitPid(), 0)
	if err != nil {
		return nil, fmt.Errorf("opening a pidfd of the sandbox's init: %w", err)
	}
	initFile := os.NewFile(uintptr(pidfd), "init")
	defer initFile.Close()
	socks, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("making the reset-root stage's socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(socks[0]), "reset-stage"), os.NewFile(uintptr(socks[1]), "reset-stage")
	defer theirs.Close()
	r, w, err := os.Pipe()
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("making the reset-root stage's stdin: %w", err)
	}
	defer r.Close()
	st := &resetStage{cmd: cmd, plan: w, sock: mine, done: make(chan struct{})}
	cmd.Stdin = r
	cmd.Stderr = &st.stderr
	cmd.ExtraFiles = []*os.File{ns, theirs, initFile} // resetNSFd, resetSockFd, resetInitFd
	if err := cmd.Start(); err != nil {
		w.Close()
		mine.Close()
		return nil, fmt.Errorf("mounting the new root in the sandbox's namespaces (nsenter, reset-root stage): %w", err)
	}
	go func() {
		st.err = cmd.Wait()
		close(st.done)
	}()
	return st, nil
}

// run has the stage carry out plan, the old writable layer's dirs in
// oldDir, and waits for its end; with plan.Tmpfs it returns the new disk
// tmpfs the stage made. A stage that exited before it errStageGone: it
// was given nothing.
func (st *resetStage) run(plan resetPlan, oldDir *os.File) (*os.File, error) {
	defer st.sock.Close()
	select {
	case <-st.done:
		st.plan.Close()
		return nil, fmt.Errorf("%w: %w", errStageGone, stageErr(st.err, &st.stderr))
	default:
	}
	b, err := json.Marshal(plan)
	if err != nil {
		st.end()
		return nil, err
	}
	err = unix.Sendmsg(int(st.sock.Fd()), []byte{0}, unix.UnixRights(int(oldDir.Fd())), nil, 0)
	if err == nil {
		_, err = st.plan.Write(b)
	}
	st.plan.Close()
	// Its answer, once the new root is in place, is one byte and, with
	// plan.Tmpfs, the new disk tmpfs: its exit (a Go runtime's, and the
	// teardown of its mount namespace) is not waited for.
	disk := -1
	if err == nil {
		disk, err = recvAnswer(st.sock)
	}
	if err != nil {
		<-st.done
		return nil, fmt.Errorf("mounting the new root in the sandbox's namespaces (nsenter, reset-root stage): %w", stageErr(errors.Join(err, st.err), &st.stderr))
	}
	if disk < 0 {
		if plan.Tmpfs != "" {
			return nil, errors.New("the reset-root stage sent no disk tmpfs")
		}
		return nil, nil
	}
	return os.NewFile(uintptr(disk), "reset disk tmpfs"), nil
}

// recvAnswer receives the stage's answer on sock: a byte, with one
// descriptor or none (-1); a stage that ended without one is an error.
func recvAnswer(sock *os.File) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("waiting for its answer: %w", err)
	}
	if n == 0 {
		return -1, errors.New("it ended without an answer")
	}
	if oobn == 0 {
		return -1, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("its answer's descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("its answer's descriptor (%v)", err)
	}
	return fds[0], nil
}

// end kills the stage, unused, and waits for its exit; nil does nothing.
func (st *resetStage) end() {
	if st == nil {
		return
	}
	st.cmd.Process.Kill()
	st.plan.Close()
	<-st.done
	st.sock.Close()
}

// putRootInNS does newOverlay's and swapRoot's work for a rootless
// sandbox. nsenter(1) joins the sandbox's user namespace and executes
// this binary's reset-root stage there, in the host's mount namespace,
// where the stage, as the user namespace's root, makes one of its own (a
// copy of the host's mounts that its user namespace owns, as init does):
// an overlay's dirs must be mounts of the caller's namespace. There it
// makes the overlay of lowers over parent's new upper and work dirs, with
// flags (userxattr among them, as the root it replaces), then does
// swapRootHere's work in the sandbox's mount namespace, and back in its
// own empties old, the old writable layer: the sandbox's user may have
// made its files private under ids that are not the caller's. The stage
// is the one PrepareReset started, waiting for its plan, or one started
// now.
func (s *Sandbox) putRootInNS(lowers []string, parent, old string, r newRoot, flags []string) error {
	oldDir, err := os.Open(old)
	if err != nil {
		return fmt.Errorf("opening the old writable layer's dir: %w", err)
	}
	defer oldDir.Close()
	plan := resetPlan{Layers: lowers, Upper: filepath.Join(parent, "upper"), Work: filepath.Join(parent, "work"),
		Mounts: r.points, Links: r.links, Owners: r.owners, Chans: r.chans, Flags: flags}
	if s.upper == "" && s.volume == nil {
		// On the disk tmpfs, which init mounted and detached with its
		// old root: an overlay takes no upper dir from a mount outside
		// the caller's namespace; the stage mounts a new tmpfs like it,
		// and binds /dev/shm from it too, so that the sandbox's files
		// are on one disk of its size, as before.
		if plan.Tmpfs, err = likeDiskTmpfs(parent); err != nil {
			return err
		}
	}
	var disk *os.File
	st := s.takeResetStage()
	if st != nil {
		disk, err = st.run(plan, oldDir)
		if errors.Is(err, errStageGone) {
			s.log.Debug("the reset-root stage started ahead is gone: starting one", "err", err)
			st = nil
		}
	}
	if st == nil {
		if st, err = s.startResetStage(); err != nil {
			return err
		}
		disk, err = st.run(plan, oldDir)
	}
	if err != nil || disk == nil {
		return err
	}
	s.confMu.Lock()
	if s.resetDisk != nil {
		s.resetDisk.Close()
	}
	s.resetDisk = disk
	s.confMu.Unlock()
	return nil
}

// recvFD receives one descriptor on the socket sock (SCM_RIGHTS).
func recvFD(sock int) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(sock, make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no descriptor came (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no descriptor came (%v)", err)
	}
	return fds[0], nil
}

// resetRootStage is the reset-root stage (sbinit.StageResetRoot): see
// putRootInNS. Its work is on one thread, which leaves the process's
// filesystem context and mount namespace for its own (a Go process has
// several threads: none may join a mount namespace but one that has its
// own filesystem context); the process exits after it.
func resetRootStage() error {
	if err := awaitPlan(); err != nil {
		return err
	}
	var plan resetPlan
	if err := json.NewDecoder(os.Stdin).Decode(&plan); err != nil {
		return fmt.Errorf("reading the reset's plan: %w", err)
	}
	oldFd, err := recvFD(resetSockFd)
	if err != nil {
		return fmt.Errorf("receiving the old writable layer's dir: %w", err)
	}
	runtime.LockOSThread() // for good: the process ends after the stage
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("making a mount namespace in the sandbox's user namespace: %w", err)
	}
	home, err := os.Open("/proc/thread-self/ns/mnt")
	if err != nil {
		return fmt.Errorf("opening the stage's mount namespace: %w", err)
	}
	defer home.Close()
	disk := -1
	r := newRoot{links: plan.Links, owners: plan.Owners, chans: plan.Chans}
	if plan.Tmpfs != "" {
		if disk, err = newDiskTmpfs(plan.Tmpfs); err != nil {
			return err
		}
		defer unix.Close(disk)
		at := "/proc/self/fd/" + strconv.Itoa(disk)
		plan.Upper, plan.Work = at+"/upper", at+"/work"
		if r.replace, err = diskScratchMounts(disk); err != nil {
			return err
		}
		defer func() {
			for _, fd := range r.replace {
				unix.Close(fd)
			}
		}()
	}
	ov, err := newOverlay(plan.Layers, plan.Upper, plan.Work, plan.Flags)
	if err != nil {
		return err
	}
	defer unix.Close(ov)
	r.points = plan.Mounts
	if err := swapRootHere(resetNSFd, ov, r); err != nil {
		return err
	}
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("leaving the sandbox's mount namespace to empty the old writable layer: %w", err)
	}
	if err := emptyDir("/proc/self/fd/" + strconv.Itoa(oldFd) + "/."); err != nil {
		return err
	}
	var rights []byte // the answer: done, with the new disk tmpfs
	if disk >= 0 {
		rights = unix.UnixRights(disk)
	}
	if err := unix.Sendmsg(resetSockFd, []byte{0}, rights, nil, 0); err != nil {
		return fmt.Errorf("answering msb: %w", err)
	}
	return nil
}

// awaitPlan waits until the plan can be read on stdin (or stdin is
// closed), and ends the process, with nothing done, if the sandbox's
// init exits first.
func awaitPlan() error {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}, {Fd: resetInitFd, Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the reset's plan: %w", err)
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if fds[1].Revents != 0 {
			os.Exit(0) // the sandbox is gone: no reset will come
		}
	}
}

// newDiskTmpfs mounts a detached tmpfs with options data, with an upper
// and a work dir and the scratch dirs (sbinit.ScratchDirs), and returns its
// descriptor: a new root's writable layer on a disk of the same size as
// the sandbox's. (Kernels from 6.15 take a detached mount's dirs as an
// overlay's.)
func newDiskTmpfs(data string) (int, error) {
	mfd, err := mount.Detached("tmpfs", strings.Split(data, ","), 0)
	if err != nil {
		return -1, fmt.Errorf("the new disk tmpfs: %w", err)
	}
	if err := sbinit.MakeDiskDirs(mfd, true); err != nil {
		unix.Close(mfd)
		return -1, fmt.Errorf("the new disk tmpfs: %w", err)
	}
	return mfd, nil
}

// diskScratchMounts are detached binds of the scratch dirs of the new
// disk tmpfs disk, nosuid and nodev as init binds them, by the mount
// point each replaces (swapRootHere).
func diskScratchMounts(disk int) (map[string]int, error) {
	out := map[string]int{}
	for _, d := range sbinit.ScratchDirs {
		fd, err := unix.OpenTree(disk, d.Name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH,
				&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
			if err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			for _, fd := range out {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("binding the new disk tmpfs's %s dir for %s: %w", d.Name, d.Target, err)
		}
		out[d.Target] = fd
	}
	return out, nil
}
