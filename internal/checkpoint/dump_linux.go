package checkpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/mount"
	"golang.org/x/sys/unix"
)

// ErrControlOutside says that a sandbox's control socket lies in another
// network namespace than the sandbox: CRIU dumps no socket of a namespace
// it does not dump. That is a sandbox with a network namespace of its own
// that its init's clone made (none was made ahead: see
// sandbox.RuntimeOptions.NetSpares), whose control socketpair msb made in
// the host's.
var ErrControlOutside = errors.New("the sandbox's control socket is in another network namespace than the sandbox")

// ManifestName is the Manifest's file in a dump's directory.
const ManifestName = "checkpoint.json"

// Manifest says what a dump's restore must supply: it is written beside
// CRIU's images.
type Manifest struct {
	Criu string `json:"criu"` // the version that dumped
	// Init is the dumped init's pid on the host, for the record.
	Init int `json:"init"`
	// Mounts are the sandbox's external mounts, in mountinfo order.
	Mounts []Mount `json:"mounts"`
	// Files are descriptors and mapped files on mounts the sandbox does
	// not see.
	Files []File `json:"files,omitempty"`
	// Control is the inode of init's end of the control socket (fd 3).
	Control uint64 `json:"control"`
	// Cgroups are init's cgroups by hierarchy, as /proc/<pid>/cgroup
	// names them ("memory", "cpu,cpuacct"; "" for cgroup v2).
	Cgroups map[string]string `json:"cgroups"`
	// Sandbox and Disk are DumpOptions'.
	Sandbox string `json:"sandbox,omitempty"`
	Disk    string `json:"disk,omitempty"`
	// Netns says the sandbox's network namespace (one of its own, not
	// msb's) was left out of the dump, as CRIU's external net[]: its
	// interfaces, addresses and routes are not in the images, its
	// processes' sockets are (established TCP connections too: both
	// ends lie in the namespace), and a restore puts them into a
	// namespace the caller made (RestoreOptions.Netns), in which the
	// caller made the control socket too, so that the restored sandbox
	// can be dumped again. False: the sandbox was on msb's network, or
	// the dump holds its namespace and each restore makes one from it,
	// whose control socket lies outside (a process of the sandbox held a
	// tap: see holdsTap; or a dump of before session 18).
	Netns bool `json:"netns,omitempty"`
}

// netnsKey is the key a dump names the sandbox's network namespace by
// (--external net[<inode>]:<key>) and a restore passes it as
// (--inherit-fd fd[<n>]:<key>).
const netnsKey = "sandbox-net"

// Mount is one external mount.
type Mount struct {
	Key    string `json:"key"`   // CRIU's name for it: "m0", "m1", ...
	Point  string `json:"point"` // where the sandbox sees it
	FSType string `json:"fstype"`
	// Source is the host path it was bound from, found through the
	// host's mounts of the same filesystem at dump time; "" when none
	// shows it (a btrfs volume: the sandbox's disk). The restore needs
	// it to exist, or RestoreOptions.Mounts to name another.
	Source string `json:"source,omitempty"`
	// Cgroup names the hierarchy of a cgroup mount: its controllers
	// ("memory", "cpu,cpuacct", "name=systemd"; "" for cgroup v2), and
	// HostPoint where the host mounts that hierarchy, so that a restore
	// into other cgroups (RestoreOptions.CgroupRoots) binds the new
	// group's dir.
	Cgroup    string `json:"cgroup,omitempty"`
	HostPoint string `json:"host_point,omitempty"`
	// Idmapped says the sandbox saw it through an idmapped mount (root
	// mode's host dirs: docs/sandbox.md, "Host files"); the restore binds
	// it through one again (RestoreOptions.Idmap).
	Idmapped bool `json:"idmapped,omitempty"`
}

// File is one external file.
type File struct {
	ID string `json:"id"` // CRIU's: file[<mnt_id>:<inode>], in hex
	// Path is the host path to reopen it by; "" when the host shows it
	// nowhere (a tmpfs disk's root, which init keeps open): the restore
	// needs RestoreOptions.Files to name one.
	Path  string `json:"path,omitempty"`
	What  string `json:"what"`  // whose it was: "fd 7 of 1234 (/)"
	Flags int    `json:"flags"` // the access mode it was open with (and O_PATH)
}

// DumpOptions says what to dump where.
type DumpOptions struct {
	// Init is the sandbox's init, the root of the tree (Sandbox.InitPid).
	Init int
	// Dir is the images directory, made if missing; it must be empty.
	Dir string
	// LeaveRunning keeps the sandbox running after the dump (else CRIU
	// kills its processes once dumped).
	LeaveRunning bool
	// FreezeCgroup is the dir of the sandbox's freezer cgroup (v1) or its
	// group (v2), for a sandbox the caller froze (sandbox.Sandbox.Freeze):
	// CRIU then seizes its processes frozen and leaves them frozen, and no
	// instruction of theirs runs between the caller's freeze and thaw. ""
	// for a sandbox that is not frozen (a v1 freezer's frozen processes
	// cannot be seized otherwise).
	FreezeCgroup string
	// Sandbox is the dumped sandbox's id, which names its cgroups, and
	// Disk the host path of its disk (sandbox.Sandbox.DiskPath), ""
	// without: recorded in the manifest for a restore into another
	// sandbox's (Criu.Restorer).
	Sandbox, Disk string
}

// ownFS are the filesystems a sandbox makes itself (init mounts them
// fresh): CRIU dumps them (tmpfs with its content) and makes them again,
// unless one is bound from a part of a filesystem the sandbox does not
// show whole (its disk's tmpfs, whose dirs are its upper dir and
// /dev/shm): see boundFromOutside.
var ownFS = []string{"proc", "sysfs", "devpts", "mqueue", "tmpfs"}

// Dump dumps the process tree of opts.Init, all of its PID namespace, to
// opts.Dir and writes the Manifest there. ctx's cancel does not stop it:
// a criu killed while its parasite code runs in the dumped processes
// leaves them crashing (the sandbox's init died of SIGSEGV,
// TestForkCancelledInDump in package engine), so a dump runs to its end.
func (c *Criu) Dump(ctx context.Context, opts DumpOptions) (*Manifest, error) {
	ctx = context.WithoutCancel(ctx)
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the images dir: %w", err)
	}
	man, err := plan(opts.Init)
	if err == nil {
		err = c.checkSockets(opts.Init)
	}
	if err != nil {
		return nil, fmt.Errorf("planning the dump of %d: %w", opts.Init, err)
	}
	man.Criu, man.Sandbox, man.Disk = c.Version, opts.Sandbox, opts.Disk
	logPath := filepath.Join(opts.Dir, "dump.log")
	args := []string{"dump", "-t", strconv.Itoa(opts.Init), "-D", opts.Dir, "-o", logPath, "-v4",
		"--manage-cgroups", "--external", fmt.Sprintf("unix[%d]", man.Control)}
	// A namespace of the sandbox's own is left out (see Manifest.Netns):
	// a restore made from it would make its own namespace, and the new
	// control socket, made outside, would leave the restored sandbox
	// undumpable.
	ns, own, err := ownNetns(opts.Init)
	if err != nil {
		return nil, err
	}
	if own {
		tap, err := holdsTap(opts.Init)
		if err != nil {
			return nil, err
		}
		if !tap {
			// Both ends of an established TCP connection lie in the
			// namespace (nothing routes out of it): each restore, in a
			// namespace of its own, gets the pair again. Not so on msb's
			// network, where a copy would clash with the live original.
			man.Netns = true
			args = append(args, "--external", fmt.Sprintf("net[%d]:%s", ns, netnsKey), "--tcp-established")
		}
	}
	// CRIU dumps every cgroup below the sandbox's in each hierarchy: in
	// one where the sandbox is in the root group (cgroup v1's cpu, say),
	// that is every group of the host (155 here), which a restore would
	// make again where gone. Only the hierarchies the sandbox has groups
	// of its own in are dumped, then.
	for h, path := range man.Cgroups {
		if h != "" && path != "/" {
			for c := range strings.SplitSeq(h, ",") {
				args = append(args, "--cgroup-dump-controller", c)
			}
		}
	}
	if opts.LeaveRunning {
		args = append(args, "--leave-running")
	}
	if opts.FreezeCgroup != "" {
		args = append(args, "--freeze-cgroup", opts.FreezeCgroup)
	}
	for _, m := range man.Mounts {
		args = append(args, "--external", fmt.Sprintf("mnt[%s]:%s", m.Point, m.Key))
	}
	for _, f := range man.Files {
		args = append(args, "--external", f.ID)
	}
	if err := c.run(ctx, "dump", logPath, args, nil); err != nil {
		return nil, err
	}
	if err := clearRouteState(opts.Dir); err != nil {
		return nil, fmt.Errorf("the dump's routes: %w", err)
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(opts.Dir, ManifestName), b, atomicfile.Options{Perm: 0o600}); err != nil {
		return nil, fmt.Errorf("writing the manifest: %w", err)
	}
	return man, nil
}

// plan reads what of init's tree lies outside the sandbox.
func plan(init int) (*Manifest, error) {
	man := &Manifest{Init: init}
	ctl, err := socketInode(init, 3)
	if err != nil {
		return nil, fmt.Errorf("init's control socket: %w", err)
	}
	man.Control = ctl
	if err := sameNetns(init, 3); err != nil {
		return nil, err
	}
	mounts, err := mount.ReadMountinfo(fmt.Sprintf("/proc/%d/mountinfo", init))
	if err != nil {
		return nil, err
	}
	host, err := mount.ReadMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	man.Cgroups, err = cgroupsOf(init)
	if err != nil {
		return nil, err
	}
	inNS := map[int]bool{}
	for _, m := range mounts {
		inNS[m.ID] = true
		if m.Point == "/" || slices.Contains(ownFS, m.FSType) && !boundFromOutside(init, m, mounts) {
			continue
		}
		src, hostPoint, err := hostSource(init, m, host)
		if err != nil {
			return nil, err
		}
		em := Mount{Key: "m" + strconv.Itoa(len(man.Mounts)), Point: m.Point, FSType: m.FSType, Source: src,
			Idmapped: slices.Contains(strings.Split(m.Options, ","), "idmapped")}
		switch m.FSType {
		case "cgroup":
			em.Cgroup, em.HostPoint = hierarchyOf(m.Super, slices.Collect(maps.Keys(man.Cgroups))), hostPoint
		case "cgroup2":
			em.HostPoint = hostPoint
		}
		man.Mounts = append(man.Mounts, em)
	}
	tree, err := processTree(init)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, pid := range tree {
		files, err := outsideFiles(pid, inNS, host)
		if err != nil {
			return nil, fmt.Errorf("files of %d: %w", pid, err)
		}
		for _, f := range files {
			if !seen[f.ID] {
				seen[f.ID] = true
				man.Files = append(man.Files, f)
			}
		}
	}
	return man, nil
}

// boundFromOutside reports whether m shows a dir of a filesystem that no
// mount of the sandbox (mounts) shows from its root: CRIU then finds no
// mount to bind it from ("doesn't have a proper root mount"), and it is
// external.
func boundFromOutside(init int, m mount.Info, mounts []mount.Info) bool {
	if m.Root == "/" {
		return false
	}
	dev := func(point string) (uint64, bool) {
		var st unix.Stat_t
		err := unix.Stat(fmt.Sprintf("/proc/%d/root%s", init, point), &st)
		return st.Dev, err == nil
	}
	d, ok := dev(m.Point)
	if !ok {
		return false
	}
	for _, o := range mounts {
		if o.Root == "/" && o.FSType == m.FSType {
			if od, ok := dev(o.Point); ok && od == d {
				return false
			}
		}
	}
	return true
}

// hostSource finds the host path a sandbox's mount m shows, and the
// point of the host's mount it is found below: a host mount of the same
// filesystem (same device) whose root contains m's root.
func hostSource(init int, m mount.Info, host []mount.Info) (source, hostPoint string, err error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/root%s", init, m.Point), &st); err != nil {
		return "", "", fmt.Errorf("stat of the sandbox's %s: %w", m.Point, err)
	}
	best, bestPoint, bestLen := "", "", -1
	for _, h := range host {
		if h.FSType != m.FSType || transient(h) {
			continue
		}
		rel, ok := under(m.Root, h.Root)
		if !ok || len(h.Root) <= bestLen {
			continue
		}
		var hs unix.Stat_t
		if unix.Stat(h.Point, &hs) != nil || hs.Dev != st.Dev {
			continue
		}
		best, bestPoint, bestLen = filepath.Join(h.Point, rel), h.Point, len(h.Root)
	}
	return best, bestPoint, nil
}

// transient reports whether a host mount is no source to record: an
// idmapped one (the host's own dirs are not; a restore's binds of them
// are, and go when it ends: see bindIdmapped) or one in a restore's work
// dir. A dump beside a restore sees those binds of the same filesystem,
// rooted deeper than the host's own mount.
func transient(h mount.Info) bool {
	return slices.Contains(strings.Split(h.Options, ","), "idmapped") ||
		strings.HasPrefix(h.Point, filepath.Join(os.TempDir(), restoreWorkPrefix))
}

// cgroupsOf returns pid's cgroups by hierarchy, as /proc/<pid>/cgroup
// names them ("memory", "cpu,cpuacct", "name=systemd"; "" for cgroup v2).
func cgroupsOf(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 {
			out[f[1]] = f[2]
		}
	}
	return out, nil
}

// hierarchyOf returns the hierarchy whose controllers a cgroup v1 mount's
// superblock options name.
func hierarchyOf(super []string, hierarchies []string) string {
	for _, h := range hierarchies {
		if h == "" {
			continue
		}
		all := true
		for c := range strings.SplitSeq(h, ",") {
			all = all && slices.Contains(super, c)
		}
		if all {
			return h
		}
	}
	return ""
}

// under returns p relative to dir when p is dir or below it.
func under(p, dir string) (string, bool) {
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if p == dir {
		return "", true
	}
	if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
		return rest, true
	}
	return "", false
}

func socketInode(pid, fd int) (uint64, error) {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return 0, err
	}
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, fmt.Errorf("fd %d is %s, not a socket", fd, link)
	}
	return strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
}

// sameNetns checks that pid's socket fd lies in pid's network namespace.
func sameNetns(pid, fd int) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return fmt.Errorf("fd %d of %d: %w", fd, pid, err)
	}
	defer unix.Close(sock)
	ns, err := unix.IoctlRetInt(sock, unix.SIOCGSKNS)
	if err != nil {
		return fmt.Errorf("network namespace of fd %d of %d: %w", fd, pid, err)
	}
	defer unix.Close(ns)
	var sst, pst unix.Stat_t
	if err := unix.Fstat(ns, &sst); err != nil {
		return err
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &pst); err != nil {
		return err
	}
	if sst.Ino != pst.Ino {
		return fmt.Errorf("%w (socket's net:[%d], init's net:[%d]): only a sandbox on the host's network or in a network namespace made ahead can be dumped", ErrControlOutside, sst.Ino, pst.Ino)
	}
	return nil
}

// ownNetns returns the inode of pid's network namespace and whether it is
// another than the calling thread's (msb's, where criu runs).
func ownNetns(pid int) (uint64, bool, error) {
	var st, self unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		return 0, false, fmt.Errorf("network namespace of %d: %w", pid, err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return 0, false, err
	}
	return st.Ino, st.Ino != self.Ino, nil
}

// ErrInetSockets says that this criu cannot dump the TCP or UDP sockets
// a process of the sandbox holds on this kernel: criu before 4.2 asks
// every socket for SO_PASSCRED, which kernels from 6.16 answer for unix,
// netlink and bluetooth sockets only ("Can't get 1:16 opt"). criu 4.2
// asks inet sockets no more.
var ErrInetSockets = errors.New("criu before 4.2 cannot dump TCP or UDP sockets on a kernel from 6.16")

func (c *Criu) checkSockets(init int) error {
	if c.inetOK() {
		return nil
	}
	inet := map[string]string{} // socket inode: its table
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", init, table))
		for i, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); i > 0 && len(f) > 9 {
				inet[f[9]] = table
			}
		}
	}
	tree, err := processTree(init)
	if err != nil {
		return err
	}
	for _, pid := range tree {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			ino, ok := strings.CutPrefix(l, "socket:[")
			if table, held := inet[strings.TrimSuffix(ino, "]")]; ok && held {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				return fmt.Errorf("%w: process %d (%s) of the sandbox holds a %s socket, and this is criu %s on kernel %s (criu 4.2 dumps it)",
					ErrInetSockets, pid, strings.TrimSpace(string(comm)), table, c.Version, kernelRelease())
			}
		}
	}
	return nil
}

// inetOK says whether c dumps inet sockets on this kernel (see
// ErrInetSockets).
func (c *Criu) inetOK() bool {
	return !versionAtLeast(kernelRelease(), 6, 16) || versionAtLeast(c.Version, 4, 2)
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// versionAtLeast says whether version v ("6.18.44-fc", "4.1.1") is
// major.minor or later.
func versionAtLeast(v string, major, minor int) bool {
	f := strings.FieldsFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	var n [2]int
	for i := 0; i < 2 && i < len(f); i++ {
		n[i], _ = strconv.Atoi(f[i])
	}
	return n[0] > major || n[0] == major && n[1] >= minor
}

// holdsTap reports whether a process of init's tree holds a tap device's
// descriptor. CRIU restores one only with its device, which a dump that
// leaves the network namespace out (Manifest.Netns) does not hold: such
// a sandbox's namespace is dumped with it. msb keeps the tap of a
// namespace it made ahead itself (package sandbox), so none of a sandbox
// of its holds one.
func holdsTap(init int) (bool, error) {
	tree, err := processTree(init)
	if err != nil {
		return false, err
	}
	for _, pid := range tree {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range ents {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l == "/dev/net/tun" {
				return true, nil
			}
		}
	}
	return false, nil
}

// processTree lists init and its descendants, parents first. Of a
// sandbox that runs, a descendant may end while it is read: it is left
// out, with its children (a caller that must see every process reads a
// frozen sandbox).
func processTree(init int) ([]int, error) {
	out := []int{init}
	for i := 0; i < len(out); i++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		if i > 0 && errors.Is(err, os.ErrNotExist) {
			continue // it ended
		}
		if err != nil {
			return nil, fmt.Errorf("threads of %d: %w", out[i], err)
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			if err != nil {
				continue // the thread ended
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
		}
	}
	return out, nil
}

// outsideFiles lists pid's descriptors and mapped files whose mount is not
// in the sandbox's namespace (inNS), with the host path of each (byID:
// the host's mounts).
func outsideFiles(pid int, inNS map[int]bool, host []mount.Info) ([]File, error) {
	byID := map[int]mount.Info{}
	for _, m := range host {
		byID[m.ID] = m
	}
	var out []File
	add := func(link string) error {
		path, err := os.Readlink(link)
		if err != nil || !strings.HasPrefix(path, "/") {
			return nil // gone, or no file of a path: a pipe, socket or anon inode, which CRIU dumps itself
		}
		fd, err := unix.Open(link, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // gone
		}
		defer unix.Close(fd)
		mnt, err := fdMount(fd)
		if err != nil || inNS[mnt] {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		flags := unix.O_RDONLY
		if strings.Contains(link, "/fd/") {
			if fl, err := fdFlags(link); err == nil {
				flags = fl & (unix.O_ACCMODE | unix.O_PATH)
			}
		}
		what := fmt.Sprintf("%s of %d (%s)", strings.Replace(filepath.Base(filepath.Dir(link)), "map_files", "mapping", 1)+" "+filepath.Base(link), pid, path)
		// A file of a mount the sandbox cannot see reads as its path
		// below that mount's root: the host's mount of it (or, for a
		// copy of a host mount made with the sandbox's mount namespace
		// and detached from it, a host mount of the same filesystem)
		// shows it at that path below its own point.
		path, ok := hostPath(path, &st, byID[mnt], host)
		if !ok {
			path = ""
		}
		out = append(out, File{ID: fmt.Sprintf("file[%x:%x]", mnt, st.Ino), Path: path, What: what, Flags: flags})
		return nil
	}
	for _, dir := range []string{"fd", "map_files"} {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/%s", pid, dir))
		if errors.Is(err, os.ErrNotExist) {
			return out, nil // it ended: a short-lived child (sleep), which the dump will not meet
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if err := add(fmt.Sprintf("/proc/%d/%s/%s", pid, dir, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// hostPath finds the host path of a file that reads as path on mount m
// (zero when the host does not show it), trying every host mount of its
// filesystem.
func hostPath(path string, st *unix.Stat_t, m mount.Info, host []mount.Info) (string, bool) {
	if sameFile(path, st) {
		return path, true
	}
	cands := []mount.Info{m}
	for _, h := range host {
		var hs unix.Stat_t
		if h.ID != m.ID && !transient(h) && unix.Stat(h.Point, &hs) == nil && hs.Dev == st.Dev {
			cands = append(cands, h)
		}
	}
	for _, h := range cands {
		if h.Point == "" {
			continue
		}
		if rel, ok := under(path, h.Root); ok && sameFile(filepath.Join(h.Point, rel), st) {
			return filepath.Join(h.Point, rel), true
		}
		if p := filepath.Join(h.Point, path); sameFile(p, st) {
			return p, true
		}
	}
	return path, false
}

func sameFile(path string, st *unix.Stat_t) bool {
	var s unix.Stat_t
	return unix.Stat(path, &s) == nil && s.Dev == st.Dev && s.Ino == st.Ino
}

// fdMount reads the mount id of an open descriptor from its fdinfo.
func fdMount(fd int) (int, error) {
	v, err := fdinfoField(fmt.Sprintf("/proc/self/fdinfo/%d", fd), "mnt_id")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

func fdFlags(link string) (int, error) {
	v, err := fdinfoField(strings.Replace(link, "/fd/", "/fdinfo/", 1), "flags")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 8, 64)
	return int(n), err
}

func fdinfoField(path, name string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no %s", path, name)
}

// logErrors returns the "Error" lines of a criu log, for an error message.
func logErrors(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, "Error (") && !strings.Contains(l, "RLIMIT_NOFILE") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > 5 {
		lines = lines[:5]
	}
	return " (" + path + ": " + strings.Join(lines, "; ") + ")"
}
