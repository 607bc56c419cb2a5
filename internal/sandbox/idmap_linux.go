package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/pool"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"golang.org/x/sys/unix"
)

// unusedID is the one id the idmap user namespace maps (to itself): a user
// namespace needs a mapping to serve for idmapped mounts, and this id owns
// no file and no account. Every id a file really has is unmapped through it.
const unusedID = 4000000000

// idmap returns, opening it the first time, the user namespace through which
// root-mode sandboxes bind the host dirs (see sbinit's bindIdmapped), or nil
// and why there is none. It is opened once per runtime and checked against
// the default host dirs: if any of them cannot be idmapped (an old kernel, a
// filesystem without idmapped mounts), none is, and Enforcement says so.
func (rt *Runtime) idmap() (*os.File, string) {
	rt.idmapOnce.Do(func() {
		warmPidfd()
		if rt.rootless {
			rt.idmapWhy = "rootless: the kernel allows idmapped mounts to root only"
			return
		}
		ns, err := rt.unmappedUserns()
		if err != nil {
			rt.idmapWhy = err.Error()
			return
		}
		for _, d := range DefaultHostDirs {
			if err := checkIdmap(d, ns); err != nil {
				ns.Close()
				rt.idmapWhy = err.Error()
				return
			}
		}
		rt.idmapNS = ns
	})
	return rt.idmapNS, rt.idmapWhy
}

// warmPidfd has the os package check, once per process, that pidfds work,
// which it does before the first process it starts (pidfd_open, waitid and
// a clone that exits: ~0.1 ms). Called where idmap runs beside a sandbox's
// first create, it keeps the check off the spawn of init, as the holder's
// start did before the namespace was kept with the pool.
func warmPidfd() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
}

// unmappedUserns is the host's unmapped user namespace, kept with the disk
// pool (bound in its directory: pool.Userns): the pool's first runtime
// makes it, and each later one, every msb run among them, opens a file
// instead of starting a holder (a fork and an exec: ~0.3 ms of wall and
// ~0.5 ms of CPU per process; docs/bench.md, session 13). The sandboxes
// of every process then bind their host dirs through one namespace, which
// maps the one id no file has, as each runtime's own did. Without a pool
// (not made yet, or none possible here) the runtime makes one of its own.
func (rt *Runtime) unmappedUserns() (*os.File, error) {
	mk := func() (*os.File, error) { return newUnmappedUserns(rt.exe) }
	ns, err := pool.Userns(rt.poolDir(), strconv.Itoa(unusedID), mk)
	if errors.Is(err, pool.ErrUnavailable) {
		return mk()
	}
	return ns, err
}

// newUnmappedUserns makes a user namespace that maps only unusedID: msb's
// init stage "hold" is started in it, its namespace opened, and killed. The
// open file keeps the namespace; killing the holder rather than letting it
// read the end of its stdin takes its Go runtime's start off the sandbox's
// creation (about as long again as the exec).
func newUnmappedUserns(exe string) (*os.File, error) {
	cmd := exec.Command(exe)
	cmd.Args = []string{"msb-sandbox-hold"}
	cmd.Env = []string{sbinit.EnvStage + "=" + sbinit.StageHold}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	ids := []syscall.SysProcIDMap{{ContainerID: unusedID, HostID: unusedID, Size: 1}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a process in a new user namespace: %w", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	stdin.Close()
	// The holder's part ended with the open: its namespace lives on in ns
	// (or the open failed and says why). How it ends does not matter.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		if ns != nil {
			ns.Close()
		}
		return nil, err
	}
	return ns, nil
}

// checkIdmap makes, and drops, an idmapped clone of dir (with its
// submounts), as a sandbox's init does; the clone is never attached
// anywhere.
func checkIdmap(dir string, ns *os.File) error {
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil // absent, or a symlink (merged /usr): not bound
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning %s: %w", dir, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("idmapped mount of %s: %w", dir, err)
	}
	return nil
}

// hostFiles is Enforcement.HostFiles.
func (rt *Runtime) hostFiles() string {
	if rt.rootless {
		return "what the calling user can read (its own files, and through its groups, supplementary ones included) " +
			"in the host dirs bound into the sandbox and in its binds"
	}
	masks := "; " + strings.Join(hostMasks, ", ") + " hidden besides"
	if _, why := rt.idmap(); why != "" {
		return "everything root can read in the host dirs but " + strings.Join(hostMasks, ", ") +
			" (no idmapped mounts: " + why + "), hidden by whiteouts in an overlay of their dir, or where overlayfs " +
			"refuses it as a layer by mounts over the files, which a host rename of one detaches (msb doctor says which)"
	}
	return "what an unprivileged user can read in the host dirs (idmapped read-only binds: no id of theirs is mapped, " +
		"so no capability overrides their permissions)" + masks + "; Config.HostReadAsRoot gives root's rights instead; " +
		"binds (Config.Binds) are read with root's rights"
}
