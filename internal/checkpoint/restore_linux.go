package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RestoreOptions says what to restore and over what.
type RestoreOptions struct {
	// Dir is a dump's images directory. A dump can be restored many
	// times (each restore only reads it).
	Dir string
	// Root is the new sandbox's root, mounted: e.g. an overlay of the
	// dumped sandbox's layers and a new upper dir holding its files.
	// CRIU binds it as the restored mount namespace's root.
	Root string
	// Mounts replace the sources of external mounts, by the point the
	// sandbox sees them at: the new sandbox's own disk dirs
	// ("/dev/shm"), or host dirs elsewhere than at the dump.
	Mounts map[string]string
	// Idmap is the user namespace the idmapped mounts of the dump are
	// bound through again (the sandbox runtime's, which maps no host id).
	// A dump with idmapped mounts is not restored without it: its root
	// would read the host's dirs as root.
	Idmap *os.File
	// CgroupRoots put the restored sandbox into other cgroups than the
	// dumped one's (CRIU's --cgroup-root): by hierarchy as
	// /proc/<pid>/cgroup names it ("pids", "memory", "cpu,cpuacct"; ""
	// for cgroup v2), the new group's path in it. Those made by the
	// restore get the dumped groups' limits; existing ones keep theirs.
	// A hierarchy not named keeps the dumped path, made again where it
	// is gone.
	CgroupRoots map[string]string
	// Files name the host paths of external files by their ID
	// (Manifest.Files), in place of the ones recorded: those the dump
	// found no host path for (a tmpfs disk's root: the new sandbox's
	// disk).
	Files map[string]string
	// Netns is the network namespace the processes of a dump that left
	// theirs out (Manifest.Netns) are restored into: one the caller made
	// and set up as the dumped sandbox's was (loopback, its interface).
	// Required for such a dump; ignored for another.
	Netns *os.File
	// Control is the restored supervisor's end of its control socket:
	// one of a socketpair made in Netns, so that the restored sandbox can
	// be dumped again (its socket in its namespace); the caller keeps the
	// other end. nil: Restore makes a socketpair in the calling thread's
	// namespace and returns the other end (Restored.Control).
	Control *os.File
}

// Restored is a restored sandbox's init, a child of this process.
type Restored struct {
	// Process is init: the caller waits for it. Its Pdeathsig (SIGKILL)
	// is armed again, on the thread of this process that ran criu: it
	// dies with that thread, as a created sandbox's init does with its
	// spawning thread.
	Process *os.Process
	// Control is the host's end of the restored supervisor's control
	// socket, blocking, which the caller owns; nil when the caller gave
	// the restored end (RestoreOptions.Control).
	Control *os.File
}

// Restore starts the processes of a dump again, in new namespaces over
// opts.Root (the network namespace opts.Netns for a dump that left its
// own out), in the dumped cgroups (made again where they are gone). Its
// init becomes a child of this process (CRIU's --restore-sibling):
// restored as criu's child, its Pdeathsig would kill it as criu exits.
func (c *Criu) Restore(ctx context.Context, opts RestoreOptions) (*Restored, error) {
	b, err := os.ReadFile(filepath.Join(opts.Dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("reading the dump's manifest: %w", err)
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(opts.Dir, ManifestName), err)
	}
	work, err := os.MkdirTemp("", restoreWorkPrefix)
	if err != nil {
		return nil, err
	}
	var binds []string // idmapped binds in work
	defer func() { removeWork(work, binds, unmountDetached) }()
	logPath, pidPath := filepath.Join(work, "restore.log"), filepath.Join(work, "pid")
	// --work-dir: criu mounts its cgroup yard (.criu.cgyard.*) in its
	// work dir, the dump dir by default; a criu killed (a cancelled
	// restore) leaves it mounted, where removeWork unmounts it.
	args := []string{"restore", "-D", opts.Dir, "-W", work, "-o", logPath, "-v4", "--root", opts.Root,
		"--restore-detached", "--restore-sibling", "--manage-cgroups", "--pidfile", pidPath}
	for _, m := range man.Mounts {
		src := m.Source
		if root, ok := opts.CgroupRoots[m.Cgroup]; ok && m.HostPoint != "" && (m.FSType == "cgroup" || m.FSType == "cgroup2") {
			src = filepath.Join(m.HostPoint, root)
		}
		if s, ok := opts.Mounts[m.Point]; ok {
			src = s
		}
		if src == "" {
			return nil, fmt.Errorf("the sandbox's %s (%s) came from no host path: give RestoreOptions.Mounts[%q]", m.Point, m.FSType, m.Point)
		}
		// A cgroup's dir is made by the restore itself (--manage-cgroups)
		// when the dumped sandbox's is gone.
		if _, err := os.Stat(src); err != nil && m.FSType != "cgroup" {
			return nil, fmt.Errorf("source of the sandbox's %s: %w (RestoreOptions.Mounts names another)", m.Point, err)
		}
		if m.Idmapped {
			if opts.Idmap == nil {
				return nil, fmt.Errorf("the sandbox saw %s through an idmapped mount: RestoreOptions.Idmap must give its user namespace", m.Point)
			}
			p, err := bindIdmapped(src, filepath.Join(work, m.Key), opts.Idmap)
			if err != nil {
				return nil, err
			}
			binds = append(binds, p)
			src = p
		}
		args = append(args, "--external", fmt.Sprintf("mnt[%s]:%s", m.Key, src))
	}
	for ctl, root := range opts.CgroupRoots {
		if ctl != "" {
			root = ctl + ":" + root
		}
		args = append(args, "--cgroup-root", root)
	}
	var pass, owned []*os.File // given to criu; of those, this call's
	defer func() {
		for _, f := range owned {
			f.Close()
		}
	}()
	for _, f := range man.Files {
		path := f.Path
		if p, ok := opts.Files[f.ID]; ok {
			path = p
		}
		if path == "" {
			return nil, fmt.Errorf("the dump found no host path for %s, %s: give RestoreOptions.Files[%q]", f.ID, f.What, f.ID)
		}
		file, err := os.OpenFile(path, f.Flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("reopening %s (%s) for the restore: %w", f.ID, f.What, err)
		}
		args = append(args, "--inherit-fd", fmt.Sprintf("fd[%d]:%s", 3+len(pass), f.ID))
		pass, owned = append(pass, file), append(owned, file)
	}
	if man.Netns {
		if opts.Netns == nil {
			return nil, errors.New("the dump left the sandbox's network namespace out: RestoreOptions.Netns must give the one to restore into")
		}
		args = append(args, "--tcp-established", "--inherit-fd", fmt.Sprintf("fd[%d]:%s", 3+len(pass), netnsKey))
		pass = append(pass, opts.Netns)
	}
	var control *os.File // the host's end, when Restore makes the pair
	restoredEnd := opts.Control
	if restoredEnd == nil {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("socketpair: %w", err)
		}
		control, restoredEnd = os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), "ctl-restored")
		owned = append(owned, restoredEnd)
	}
	args = append(args, "--inherit-fd", fmt.Sprintf("fd[%d]:socket:[%d]", 3+len(pass), man.Control))
	pass = append(pass, restoredEnd)
	err = c.run(ctx, "restore", logPath, args, func(cmd *exec.Cmd) { cmd.ExtraFiles = pass })
	if err != nil {
		control.Close()
		if ctx.Err() != nil { // cancelled: the log says nothing wrong
			return nil, err
		}
		return nil, keepLog(err, logPath)
	}
	b, err = os.ReadFile(pidPath)
	var pid int
	if err == nil {
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err != nil {
		control.Close()
		return nil, errors.Join(fmt.Errorf("reading the restored init's pid: %w", err), errors.New("its processes run on unreaped"))
	}
	p, _ := os.FindProcess(pid) // never fails on Linux
	return &Restored{Process: p, Control: control}, nil
}

// keepLog keeps the log of a failed restore, whose work dir goes, beside
// it in os.TempDir, and names it in err: its error lines (in err) seldom
// say all (criu's route restore says only that ip failed).
func keepLog(err error, logPath string) error {
	b, rerr := os.ReadFile(logPath)
	if rerr != nil {
		return err
	}
	f, cerr := os.CreateTemp("", "msb-restore-failed-*.log")
	if cerr != nil {
		return err
	}
	defer f.Close()
	if _, werr := f.Write(b); werr != nil {
		return err
	}
	return fmt.Errorf("%w (whole log kept: %s)", err, f.Name())
}

// restoreWorkPrefix names a restore's work dir in os.TempDir.
const restoreWorkPrefix = "msb-restore-"

// removeWork removes a restore's work dir once unmount took each of
// binds, the idmapped binds of host dirs made in it, and the cgroup yard
// a killed criu left mounted there. If one stays mounted, the dir stays
// too: a removal would go on into the host dir (or the cgroups).
func removeWork(work string, binds []string, unmount func(string) error) error {
	var errs []error
	for _, p := range binds {
		if err := unmount(p); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w (%s is left)", p, err, work))
		}
	}
	yards, _ := filepath.Glob(filepath.Join(work, ".criu.cgyard.*"))
	for _, p := range yards {
		if err := unmount(p); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting criu's cgroup yard %s: %w (%s is left)", p, err, work))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.RemoveAll(work)
}

func unmountDetached(p string) error { return unix.Unmount(p, unix.MNT_DETACH) }

// bindIdmapped attaches an idmapped clone of src (with what is mounted
// below it) at at, a new dir or file like src, for CRIU to bind from: a
// bind of an idmapped mount keeps its idmap. The caller unmounts it.
func bindIdmapped(src, at string, userns *os.File) (string, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		err = os.Mkdir(at, 0o700)
	} else {
		err = os.WriteFile(at, nil, 0o600)
	}
	if err != nil {
		return "", err
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return "", fmt.Errorf("cloning %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return "", fmt.Errorf("idmapping %s: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("attaching the idmapped %s at %s: %w", src, at, err)
	}
	return at, nil
}
