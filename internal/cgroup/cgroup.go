package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Root is where cgroup hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// ErrUnavailable means no writable cgroup hierarchy with the needed
// controllers was found.
var ErrUnavailable = errors.New("no writable cgroup hierarchy with memory and pids controllers")

// Limits are what a Group enforces; zero means unlimited.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
}

// Usage is what the kernel counted for a Group.
type Usage struct {
	MemoryBytes     int64  `json:"memory_bytes"`
	MemoryPeakBytes int64  `json:"memory_peak_bytes"`
	Pids            int64  `json:"pids"`
	CPUNanos        uint64 `json:"cpu_nanos"`
	OOMKills        int64  `json:"oom_kills"`
	// PidsLimitHits counts forks refused because the pids limit was reached.
	PidsLimitHits int64 `json:"pids_limit_hits"`
}

// Version names a cgroup hierarchy layout.
type Version string

// Hierarchy versions.
const (
	V1 Version = "v1"
	V2 Version = "v2"
)

// Info says what this host offers for sandboxes.
type Info struct {
	Version Version `json:"version,omitempty"`
	// Parent holds one directory per controller (v1) or one directory (v2)
	// under which sandbox groups are made.
	Parents     map[string]string `json:"parents,omitempty"`
	Controllers []string          `json:"controllers,omitempty"`
	Reason      string            `json:"reason,omitempty"` // why unavailable
	// Leaf (v2) is where PrepareParents first moves this process, out of
	// the cgroup that is to enable controllers for the parent (SelfLeaf).
	Leaf string `json:"leaf,omitempty"`
	// Enable (v2) are cgroups above the parent, top down, in which
	// PrepareParents enables the controllers the groups need.
	Enable []string `json:"enable,omitempty"`
	// WantsScope (v2, rootless, not usable, no MSB_CGROUP_PARENT) says that
	// a cgroup of msb's own, delegated to it, would make groups possible: the
	// caller's cgroup is not delegated to it, or holds other processes (see
	// JoinSystemdScope).
	WantsScope bool `json:"wants_scope,omitempty"`
}

// Usable reports whether groups can be created.
func (i Info) Usable() bool { return i.Version != "" }

// v1Controllers are the hierarchies a v1 group spans, in creation order.
// The freezer is optional: without it a group cannot be frozen (Freeze).
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// Detect finds where sandbox groups can be created. delegated, when not
// empty, is a directory the caller may write (MSB_CGROUP_PARENT): one in a
// cgroup v2 hierarchy, or one in a v1 hierarchy (see detectDelegated).
// Otherwise the groups go below the caller's own cgroup (see detectOwnV2
// and detectV1): as root, or where that cgroup is delegated to the caller
// (systemd's Delegate=yes, or an administrator's chown).
func Detect(delegated string) Info {
	if delegated != "" {
		return detectDelegated(delegated)
	}
	self, err := selfCgroups()
	if err != nil {
		return Info{Reason: err.Error()}
	}
	root := os.Geteuid() == 0
	for _, mount := range []string{Root, filepath.Join(Root, "unified")} {
		if ctrls, _ := readControllers(filepath.Join(mount, "cgroup.controllers")); has(ctrls, "memory") && has(ctrls, "pids") {
			return detectOwnV2(mount, self[""], os.Getpid(), root)
		}
	}
	info := detectV1(func(c string) string { return filepath.Join(Root, c, self[c], "msb") }, !root)
	if !info.Usable() && !root {
		info.Reason = "not root and no delegated cgroup: " + info.Reason + "; " + delegateHint
	}
	return info
}

// delegateHint says how an unprivileged user gets a cgroup of their own.
const delegateHint = "run msb in a cgroup delegated to you (systemd: systemd-run --user --scope -p Delegate=yes msb ...), " +
	"or set MSB_CGROUP_PARENT to a directory under one"

// SelfLeaf is the cgroup v2 leaf msb moves its own process into, below the
// cgroup it started in, so that this cgroup may enable controllers for the
// sandboxes' parent next to it: a v2 cgroup with processes cannot
// (the "no internal processes" rule), but for the root cgroup.
const SelfLeaf = "msb-self"

// detectOwnV2 places groups under the v2 cgroup own (a path below mount)
// of process pid:
//   - own may hand controllers to its children (it is the hierarchy's root,
//     exempt from the "no internal processes" rule): under own/msb;
//   - own may be written by the caller (root, or delegated to it) and holds
//     pid alone: pid moves to own/msb-self (PrepareParents does it), and
//     groups go under own/msb; a process already in such a leaf stays;
//   - else, as root, where the top of the mount may hand controllers down:
//     under <mount>/msb, outside the caller's cgroup;
//   - else nothing. Inside a cgroup namespace the mount's top is the
//     namespace's, not the hierarchy's root: a container whose top cgroup
//     holds msb and other processes gets no groups, and says so.
func detectOwnV2(mount, own string, pid int, root bool) Info {
	cg := filepath.Join(mount, own)
	moved := filepath.Base(own) == SelfLeaf
	if moved {
		cg = filepath.Dir(cg)
	}
	under := func(dir string) Info {
		info := detectV2(filepath.Join(dir, "msb"))
		if info.Usable() {
			info.Enable = []string{dir}
		}
		return info
	}
	writable := writableCgroup(cg)
	if writable && mayEnable(cg) {
		return under(cg)
	}
	var others []int
	if !moved {
		others = otherProcs(cg, pid)
	}
	why := ""
	switch {
	case !writable:
		why = fmt.Sprintf("cgroup v2 %s is not delegated to uid %d", cg, os.Geteuid())
	case len(others) > 0:
		why = fmt.Sprintf("cgroup v2 %s also holds processes %v: msb moves itself into a leaf below it, "+
			"which it may only do alone", cg, others)
	default:
		info := under(cg)
		if info.Usable() && !moved {
			info.Leaf = filepath.Join(cg, SelfLeaf)
		}
		return info
	}
	if root {
		if top := filepath.Clean(mount); top != cg && mayEnable(top) && writableCgroup(top) {
			return under(top)
		}
		return Info{Reason: why + "; nor may the top of " + mount + " hand the controllers down (a cgroup namespace's, with processes)"}
	}
	return Info{Reason: why + "; " + delegateHint, WantsScope: true}
}

// mayEnable reports whether the v2 cgroup dir may hand controllers to its
// children whatever processes it holds: the hierarchy's root (the one
// cgroup without a cgroup.type file), or one that already does.
func mayEnable(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.type")); errors.Is(err, os.ErrNotExist) {
		_, err := os.Stat(filepath.Join(dir, "cgroup.controllers"))
		return err == nil
	}
	on, _ := readControllers(filepath.Join(dir, "cgroup.subtree_control"))
	return has(on, "memory") && has(on, "pids")
}

// writableCgroup reports whether this process may create groups in dir and
// move processes and enable controllers there.
func writableCgroup(dir string) bool {
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if unix.Access(p, unix.W_OK) != nil {
			return false
		}
	}
	return true
}

// otherProcs lists the processes in the cgroup dir other than pid.
func otherProcs(dir string, pid int) []int {
	pids, _ := readPids(dir)
	var out []int
	for _, p := range pids {
		if p != pid {
			out = append(out, p)
		}
	}
	return out
}

// detectDelegated takes a directory in a v1 hierarchy, such as
// /sys/fs/cgroup/memory/alice/msb, to name the same path in each v1
// hierarchy a group joins (memory and pids, and cpu and cpuacct where they
// are delegated too); any other directory is a v2 one.
func detectDelegated(parent string) Info {
	parent = filepath.Clean(parent)
	if rel, err := filepath.Rel(Root, parent); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		hier, sub, _ := strings.Cut(rel, string(filepath.Separator))
		if slices.Contains(v1Controllers, hier) && isV1(filepath.Join(Root, hier)) {
			if sub == "" {
				return Info{Reason: fmt.Sprintf("MSB_CGROUP_PARENT %s is the root of a cgroup v1 hierarchy: name a directory below one delegated to you", parent)}
			}
			return detectV1(func(c string) string { return filepath.Join(Root, c, sub) }, true)
		}
	}
	return detectV2(parent)
}

// detectV1 places groups under parentOf(controller) in each v1 hierarchy.
// Delegated parents must be writable (the directory, or the one above it
// where msb is to create it); cpu and cpuacct are used only where they are.
func detectV1(parentOf func(controller string) string, delegated bool) Info {
	info := Info{Version: V1, Parents: map[string]string{}}
	for _, c := range v1Controllers {
		optional := c == "cpu" || c == "cpuacct" || c == "freezer" // CPU quota and accounting, Freeze
		base := filepath.Join(Root, c)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			if optional {
				continue
			}
			return Info{Reason: fmt.Sprintf("cgroup v1 %s controller not mounted at %s", c, base)}
		}
		parent := parentOf(c)
		if delegated && !writable(parent) {
			if optional {
				continue
			}
			return Info{Reason: fmt.Sprintf("delegated cgroup v1 %s: cannot write %s (nor create it)", c, parent)}
		}
		info.Parents[c] = parent
		info.Controllers = append(info.Controllers, c)
	}
	return info
}

// writable reports whether dir can be written, or else created in the
// directory above it, by this process.
func writable(dir string) bool {
	if _, err := os.Stat(dir); err == nil {
		return unix.Access(dir, unix.W_OK) == nil && unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) == nil
	}
	return unix.Access(filepath.Dir(dir), unix.W_OK) == nil
}

// isV1 reports whether dir is the mount of a cgroup v1 hierarchy.
func isV1(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP_SUPER_MAGIC
}

func detectV2(parent string) Info {
	ctrls, err := readControllers(filepath.Join(filepath.Dir(parent), "cgroup.controllers"))
	if err != nil {
		return Info{Reason: fmt.Sprintf("reading controllers above %s: %v", parent, err)}
	}
	if !has(ctrls, "memory") || !has(ctrls, "pids") {
		return Info{Reason: fmt.Sprintf("cgroup v2 at %s lacks memory or pids controller (has %v)", parent, ctrls)}
	}
	return Info{Version: V2, Parents: map[string]string{"": parent}, Controllers: ctrls}
}

// selfCgroups maps controller name to this process's cgroup path ("" for v2).
func selfCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroup: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func readControllers(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Group is one sandbox's cgroup.
type Group struct {
	info Info
	dirs map[string]string // controller ("" for v2) -> directory
}

// Create makes the group name under info's parents and sets limits.
func Create(info Info, name string, l Limits) (*Group, error) {
	if !info.Usable() {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, info.Reason)
	}
	g := &Group{info: info, dirs: map[string]string{}}
	for c, parent := range info.Parents {
		if (c == "cpu" || c == "cpuacct") && l.CPUs == 0 {
			// Each v1 hierarchy joined costs an attach (an RCU grace
			// period) per sandbox; join cpu only when it limits something.
			continue
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Destroy()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		g.dirs[c] = dir
	}
	if err := g.setLimits(l); err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

// PrepareParents creates the msb parents of info (once per runtime, before
// any Create) and, on v2, moves this process into info.Leaf and enables the
// controllers the groups need, from the top of info.Enable down to the
// parent.
func PrepareParents(info Info) error {
	if info.Version != V2 {
		for _, parent := range info.Parents {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("creating cgroup parent %s: %w", parent, err)
			}
		}
		return nil
	}
	if info.Leaf != "" {
		if err := os.Mkdir(info.Leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating cgroup %s for msb itself: %w", info.Leaf, err)
		}
		// Writing one pid moves every thread of the process.
		if err := os.WriteFile(filepath.Join(info.Leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("moving msb (pid %d) into %s: %w", os.Getpid(), info.Leaf, err)
		}
	}
	for _, dir := range info.Enable {
		if err := enableControllers(dir); err != nil {
			return err
		}
	}
	parent := info.Parents[""]
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating cgroup parent %s: %w", parent, err)
	}
	return enableControllers(parent)
}

// enableControllers enables memory and pids, and cpu where dir has it, for
// dir's children.
func enableControllers(dir string) error {
	want := "+memory +pids"
	if ctrls, _ := readControllers(filepath.Join(dir, "cgroup.controllers")); has(ctrls, "cpu") {
		want += " +cpu"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(want), 0); err != nil {
		return fmt.Errorf("enabling %q in %s: %w", want, dir, err)
	}
	return nil
}

func (g *Group) setLimits(l Limits) error {
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUs < 0 {
		return fmt.Errorf("negative limit: %+v", l)
	}
	var writes [][2]string // file (controller/name), value
	if g.info.Version == V2 {
		if l.MemoryBytes > 0 {
			writes = append(writes, [2]string{"/memory.max", itoa(l.MemoryBytes)}, [2]string{"/memory.swap.max", "0"})
		}
		if l.Pids > 0 {
			writes = append(writes, [2]string{"/pids.max", itoa(l.Pids)})
		}
		if l.CPUs > 0 {
			writes = append(writes, [2]string{"/cpu.max", fmt.Sprintf("%d 100000", int64(l.CPUs*100000))})
		}
	} else {
		if l.MemoryBytes > 0 {
			writes = append(writes, [2]string{"memory/memory.limit_in_bytes", itoa(l.MemoryBytes)})
			if _, err := os.Stat(filepath.Join(g.dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
				writes = append(writes, [2]string{"memory/memory.memsw.limit_in_bytes", itoa(l.MemoryBytes)})
			}
		}
		if l.Pids > 0 {
			writes = append(writes, [2]string{"pids/pids.max", itoa(l.Pids)})
		}
		if l.CPUs > 0 {
			if g.dirs["cpu"] == "" {
				return errors.New("CPU limit asked but the cgroup v1 cpu controller is not mounted")
			}
			writes = append(writes, [2]string{"cpu/cpu.cfs_period_us", "100000"}, [2]string{"cpu/cpu.cfs_quota_us", itoa(int64(l.CPUs * 100000))})
		}
	}
	for _, w := range writes {
		if err := g.write(w[0], w[1]); err != nil {
			return err
		}
	}
	return nil
}

// write writes value to "controller/file" ("/file" on v2).
func (g *Group) write(cfile, value string) error {
	c, file, _ := strings.Cut(cfile, "/")
	p := filepath.Join(g.dirs[c], file)
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, p, err)
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Add moves pid into the group.
func (g *Group) Add(pid int) error {
	for c := range g.dirs {
		if err := g.write(c+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// OpenForClone opens the group's directory for a clone straight into it
// (CLONE_INTO_CGROUP: syscall.SysProcAttr's UseCgroupFD and CgroupFD): a
// process born in the group needs no Add, whose move waits for an RCU
// grace period. Only a v2 group has the one directory that takes; on v1
// it returns nil.
func (g *Group) OpenForClone() (*os.File, error) {
	if g.info.Version != V2 {
		return nil, nil
	}
	f, err := os.OpenFile(g.dirs[""], os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s to clone into: %w", g.dirs[""], err)
	}
	return f, nil
}

// CloneIntoSupported reports whether the kernel has clone3, which a clone
// into a cgroup needs (Linux 5.7); a seccomp filter around msb may hide it.
func CloneIntoSupported() bool {
	// Arguments of size 0 are invalid: EINVAL where clone3 exists.
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	return errno != unix.ENOSYS
}

// Dirs returns the group's directories (one on v2, one per controller on v1).
func (g *Group) Dirs() []string {
	var out []string
	for _, d := range g.dirs {
		out = append(out, d)
	}
	return out
}

// Kill sends SIGKILL to every process in the group and waits (up to a
// second) until it is empty.
func (g *Group) Kill() error {
	return killDirs(g.Dirs())
}

// Destroy kills what is left and removes the group's directories. A group
// its processes have all left (a sandbox's, once its PID namespace is gone)
// is removed at once, each directory by one rmdir; only the directories
// that still hold a process (EBUSY) are thawed, killed and waited for.
func (g *Group) Destroy() error {
	var busy []string
	for _, d := range g.Dirs() {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			busy = append(busy, d)
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return RemoveDirs(busy)
}

// RemoveDirs kills the processes in cgroup directories and removes them;
// gc uses it for groups whose owner died.
func RemoveDirs(dirs []string) error {
	var errs []error
	if err := killDirs(dirs); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := rmdirRetry(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func killDirs(dirs []string) error {
	for _, d := range dirs {
		thawV1(d) // a v1 frozen task dies only once thawed
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0); err == nil {
			continue
		}
		for i := 0; i < 100; i++ {
			pids, err := readPids(d)
			if err != nil || len(pids) == 0 {
				break
			}
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, d := range dirs {
		for i := 0; i < 1000; i++ {
			if pids, err := readPids(d); err != nil || len(pids) == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

func rmdirRetry(d string) error {
	var err error
	for i := 0; i < 200; i++ {
		if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return err
		}
		time.Sleep(5 * time.Millisecond) // the kernel frees exited tasks asynchronously
	}
	return err
}

func readPids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Usage reads the group's counters.
func (g *Group) Usage() (Usage, error) {
	var u Usage
	if g.info.Version == V2 {
		d := g.dirs[""]
		u.MemoryBytes = readInt(filepath.Join(d, "memory.current"))
		u.MemoryPeakBytes = readInt(filepath.Join(d, "memory.peak"))
		u.Pids = readInt(filepath.Join(d, "pids.current"))
		u.OOMKills = readKey(filepath.Join(d, "memory.events"), "oom_kill")
		u.CPUNanos = uint64(readKey(filepath.Join(d, "cpu.stat"), "usage_usec")) * 1000
		u.PidsLimitHits = readKey(filepath.Join(d, "pids.events"), "max")
		return u, nil
	}
	m := g.dirs["memory"]
	u.MemoryBytes = readInt(filepath.Join(m, "memory.usage_in_bytes"))
	u.MemoryPeakBytes = readInt(filepath.Join(m, "memory.max_usage_in_bytes"))
	u.OOMKills = readKey(filepath.Join(m, "memory.oom_control"), "oom_kill")
	u.Pids = readInt(filepath.Join(g.dirs["pids"], "pids.current"))
	u.PidsLimitHits = readKey(filepath.Join(g.dirs["pids"], "pids.events"), "max")
	if c := g.dirs["cpuacct"]; c != "" {
		u.CPUNanos = uint64(readInt(filepath.Join(c, "cpuacct.usage")))
	}
	return u, nil
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func readKey(p, key string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key { // "key value [unit]"
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Leftovers lists groups under info's parents whose names satisfy dead;
// gc removes them.
func Leftovers(info Info, dead func(name string) bool) map[string][]string {
	out := map[string][]string{}
	for _, parent := range info.Parents {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && dead(e.Name()) {
				out[e.Name()] = append(out[e.Name()], filepath.Join(parent, e.Name()))
			}
		}
	}
	return out
}

// RemoveStaleEmpty removes groups under info's parents that hold no process
// and were made more than age ago (what a killed owner left after its
// processes died). A group with processes is never touched: it may belong
// to a live sandbox of another msb process or state dir.
func RemoveStaleEmpty(info Info, age time.Duration) []string {
	var removed []string
	for _, parent := range info.Parents {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			fi, err := os.Stat(dir)
			if err != nil || time.Since(fi.ModTime()) < age {
				continue
			}
			if pids, err := readPids(dir); err != nil || len(pids) > 0 {
				continue
			}
			if os.Remove(dir) == nil {
				removed = append(removed, dir)
			}
		}
	}
	return removed
}

// MemAvailable is the host's available memory (MemAvailable in
// /proc/meminfo), or -1 when it cannot be read.
func MemAvailable() int64 {
	if n := readKey("/proc/meminfo", "MemAvailable:"); n > 0 {
		return n << 10
	}
	return -1
}
