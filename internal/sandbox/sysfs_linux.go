package sandbox

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// What a sandbox shows of itself as a container does: its own cgroup,
// read-only, at /sys/fs/cgroup, and an interface besides loopback. Test
// suites read both (a CPU quota from the cgroup, "the machine's address"
// from the interfaces) and fail without them.

// cgroupFS is what init mounts at /sys/fs/cgroup for a sandbox in group g
// (nil: none, where the runtime has no cgroups; /sys/fs/cgroup then stays
// empty): the cgroup2 filesystem, or on cgroup v1 each hierarchy g has a
// directory in, named as on the host.
func (rt *Runtime) cgroupFS(g *cgroup.Group) *wire.CgroupFS {
	if g == nil {
		return nil
	}
	if rt.cg.Version == cgroup.V2 {
		return &wire.CgroupFS{V2: true}
	}
	byController := v1Hierarchies()
	fs := &wire.CgroupFS{}
	for _, d := range g.Dirs() {
		rel, err := filepath.Rel(cgroup.Root, d)
		if err != nil {
			continue
		}
		c, _, _ := strings.Cut(rel, "/")
		h, ok := byController[c]
		if ok && !slices.ContainsFunc(fs.Hierarchies, func(o wire.CgroupHierarchy) bool { return o.Dir == h.Dir }) {
			fs.Hierarchies = append(fs.Hierarchies, h)
		}
	}
	slices.SortFunc(fs.Hierarchies, func(a, b wire.CgroupHierarchy) int { return strings.Compare(a.Dir, b.Dir) })
	return fs
}

// v1Hierarchies maps each cgroup v1 controller of this process to its
// hierarchy as mounted below cgroup.Root, read once.
var v1Hierarchies = sync.OnceValue(func() map[string]wire.CgroupHierarchy {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseV1Hierarchies(f, func(name string) string {
		p, err := filepath.EvalSymlinks(filepath.Join(cgroup.Root, name))
		if err != nil || filepath.Dir(p) != cgroup.Root {
			return name
		}
		return filepath.Base(p)
	})
})

// parseV1Hierarchies reads a /proc/PID/cgroup file: each v1 line's
// controllers ("cpu,cpuacct") are a hierarchy's mount options, the
// directory that dirOf gives for its first controller is its directory,
// and each controller named otherwise links to it.
func parseV1Hierarchies(r io.Reader, dirOf func(name string) string) map[string]wire.CgroupHierarchy {
	out := map[string]wire.CgroupHierarchy{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" || strings.Contains(parts[1], "name=") {
			continue // cgroup v2's line, or a named hierarchy without controllers
		}
		ctrls := strings.Split(parts[1], ",")
		h := wire.CgroupHierarchy{Dir: dirOf(ctrls[0]), Options: parts[1]}
		for _, c := range ctrls {
			if c != h.Dir {
				h.Links = append(h.Links, c)
			}
		}
		for _, c := range ctrls {
			out[c] = h
		}
	}
	return out
}

// sandboxIface is the interface a sandbox without a network gets (see
// wire.Iface): eth0 with the address a filtered sandbox has, nil where
// this host has no /dev/net/tun this process may open.
func sandboxIface() *wire.Iface {
	if !tunAvailable() {
		return nil
	}
	return &wire.Iface{Name: forwarderTap, Addr: forwarderGuest}
}

// thpAlways reports whether the host's transparent huge pages are on for
// all memory (mode "always", Debian's kernel default), where an idle
// supervisor's few touched pages of a 2 MiB range become a huge page
// (sbinit's noHugePages): only there the supervisor pays for avoiding it.
var thpAlways = sync.OnceValue(func() bool {
	b, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return thpModeAlways(string(b))
})

// thpModeAlways reads the THP mode file's text ("always [madvise] never":
// the bracketed mode is in force).
func thpModeAlways(mode string) bool { return strings.Contains(mode, "[always]") }

var tunAvailable = sync.OnceValue(func() bool {
	return unix.Access("/dev/net/tun", unix.R_OK|unix.W_OK) == nil
})
