package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// Check is one line of msb doctor.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
	Required bool   `json:"required"` // sandboxes cannot run without it
}

// Doctor checks the kernel features sandboxes need, in this runtime's mode,
// and finally creates a sandbox and runs a command in it.
func (rt *Runtime) Doctor(ctx context.Context) []Check {
	userns := rt.probeUserns()
	fixUserns := "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or run as root"
	checks := []Check{
		rt.probe("user namespace", "true", unix.CLONE_NEWUSER, rt.rootless, fixUserns),
		rt.probe("mount namespace", "true", userns|unix.CLONE_NEWNS, true, fixUserns),
		rt.probe("pid namespace", "true", userns|unix.CLONE_NEWPID, true, "a kernel with CONFIG_PID_NS"),
		rt.probe("network namespace", "true", userns|unix.CLONE_NEWNET, true, "a kernel with CONFIG_NET_NS"),
		rt.probe("ipc+uts namespaces", "true", userns|unix.CLONE_NEWIPC|unix.CLONE_NEWUTS, true, "a kernel with CONFIG_IPC_NS and CONFIG_UTS_NS"),
		rt.probe("cgroup namespace", "true", userns|unix.CLONE_NEWCGROUP, true, "a kernel with CONFIG_CGROUPS"),
		filesystemCheck("overlayfs", "overlay", "modprobe overlay"),
		rt.probe("overlay ("+rt.Mode()+")", "overlay", userns|unix.CLONE_NEWNS, true, "overlayfs in user namespaces needs Linux >= 5.11; as a fallback use copy mode"),
		rt.probe("pivot_root", "pivot_root", userns|unix.CLONE_NEWNS, true, "a kernel that allows pivot_root in a mount namespace"),
		rt.probe("seccomp filter", "seccomp", 0, true, "a kernel with CONFIG_SECCOMP_FILTER"),
		rt.cgroupCheck(),
		rt.attachCheck(),
		rt.diskCheck(),
		rt.hostFilesCheck(),
		rt.userCheck(),
	}
	checks = append(checks, rt.smokeTest(ctx))
	return checks
}

func (rt *Runtime) diskCheck() Check {
	d := rt.disk()
	c := Check{Name: "disk limit", OK: d.kind != diskHost, Detail: d.describe()}
	switch {
	case d.kind == diskHost:
		c.Fix = "Linux 6.6+ (a tmpfs with user xattrs can be the overlay's upper dir in a user namespace)"
		if !rt.rootless {
			c.Fix = "install btrfs-progs and have loop devices (/dev/loop-control) and btrfs; or " + c.Fix
		}
	case d.kind == diskTmpfs && !rt.rootless:
		c.OK = false // holds, in memory: degraded
		c.Fix = "install btrfs-progs and have loop devices (/dev/loop-control) and btrfs, for a disk pool"
	}
	return c
}

func (rt *Runtime) hostFilesCheck() Check {
	c := Check{Name: "host files", OK: true, Detail: rt.hostFiles()}
	if rt.rootless {
		return c
	}
	if _, why := rt.idmap(); why != "" {
		c.OK = false
		c.Fix = "Linux 5.12+ and host dirs on filesystems with idmapped mounts (ext4, xfs, btrfs, overlayfs 5.19+, tmpfs 6.3+)"
	}
	c.Detail += "; " + rt.whiteoutsCheck()
	return c
}

// whiteoutsCheck says how the masks hold where a sandbox reads the host
// dirs as root: sbinit's whiteouts probe makes the default host dirs that
// hold masks as such a sandbox has them.
func (rt *Runtime) whiteoutsCheck() string {
	w := rt.probe("whiteouts", "whiteouts", unix.CLONE_NEWNS, false, "",
		sbinit.EnvProbeHostDirs+"="+strings.Join(DefaultHostDirs, "\n"), sbinit.EnvProbeMasks+"="+strings.Join(hostMasks, "\n"))
	if w.OK {
		return "a sandbox that reads the host dirs as root has the masked paths as whiteouts in an overlay of their dir, " +
			"which no rename on the host undoes"
	}
	return "a sandbox that reads the host dirs as root has the masks as mounts over the files, which a host rename of one " +
		"(passwd, useradd) detaches in the sandboxes running then: overlayfs refuses their dir as a layer (" + w.Detail + ")"
}

// cloneNewNS is the mount namespace flag, for probes.
const cloneNewNS = unix.CLONE_NEWNS

// probeUserns is the user namespace flag a probe needs in this mode.
func (rt *Runtime) probeUserns() uintptr {
	if rt.rootless {
		return unix.CLONE_NEWUSER
	}
	return 0
}

// probe runs one of sbinit's probes in a child with the namespaces flags
// (and the extra environment entries env) and reports whether it worked.
func (rt *Runtime) probe(name, probe string, flags uintptr, required bool, fix string, env ...string) Check {
	c := Check{Name: name, Required: required}
	cmd := exec.Command(rt.exe)
	cmd.Args = []string{"msb-probe-" + probe}
	// The probe makes its mount points in a dir of its own, removed here:
	// after a pivot the probe cannot reach it any more.
	dir, err := os.MkdirTemp(rt.stateDir, ".probe-")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	cmd.Env = []string{sbinit.EnvStage + "=" + sbinit.StageProbe, sbinit.EnvProbe + "=" + probe, "MSB_PROBE_DIR=" + dir}
	if rt.rootless {
		cmd.Env = append(cmd.Env, "MSB_PROBE_USERXATTR=1")
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	attr := &syscall.SysProcAttr{Cloneflags: flags}
	if flags&unix.CLONE_NEWUSER != 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		c.Detail = strings.TrimSpace(stderr.String())
		if c.Detail == "" {
			c.Detail = err.Error()
		}
		c.Fix = fix
		return c
	}
	c.OK, c.Detail = true, "works"
	return c
}

// keptProbe is probe for a check a runtime needs on every process's first
// sandbox (disk's tmpfs upper dir): a success is kept for the boot in
// the state dir (<state>/.probed-<key>, holding the boot id), so that
// later processes of this boot, each msb run among them, skip the probe's
// process (a clone, an exec of msb-sandbox and two mounts, on the create's
// path). What the kernel can do does not change within a boot; a failure
// is not kept, and doctor runs its own probes.
func (rt *Runtime) keptProbe(key string, probe func() Check) Check {
	path := filepath.Join(rt.stateDir, ".probed-"+key)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(boot) == 0 {
		return probe()
	}
	if kept, err := os.ReadFile(path); err == nil && bytes.Equal(kept, boot) {
		return Check{Name: key, OK: true, Detail: "works (probed earlier in this boot)"}
	}
	c := probe()
	if c.OK {
		// Lost or failed, the next process probes again.
		_ = atomicfile.Write(path, boot, atomicfile.Options{Perm: 0o600, NoSync: true})
	}
	return c
}

func filesystemCheck(name, fs, fix string) Check {
	b, _ := os.ReadFile("/proc/filesystems")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(strings.TrimPrefix(line, "nodev")) == fs {
			return Check{Name: name, OK: true, Detail: "in /proc/filesystems", Required: true}
		}
	}
	return Check{Name: name, Detail: fs + " not in /proc/filesystems", Fix: fix, Required: true}
}

// parentList is the cgroup parents by controller, sorted, for a person:
// "cpu /sys/fs/cgroup/cpu/msb, memory /sys/fs/cgroup/memory/msb" (one
// path alone when every controller shares it, as on cgroup v2).
func parentList(parents map[string]string) string {
	ctrls := slices.Sorted(maps.Keys(parents))
	paths := map[string]bool{}
	parts := make([]string, 0, len(ctrls))
	for _, c := range ctrls {
		paths[parents[c]] = true
		parts = append(parts, c+" "+parents[c])
	}
	if len(paths) == 1 {
		return parents[ctrls[0]]
	}
	return strings.Join(parts, ", ")
}

func (rt *Runtime) cgroupCheck() Check {
	e := rt.Enforcement()
	c := Check{Name: "cgroup limits", Detail: fmt.Sprintf("memory: %s; pids: %s; cpu: %s", e.Memory, e.Pids, e.CPU)}
	if rt.cg.Usable() {
		c.OK = true
		c.Detail = fmt.Sprintf("cgroup %s under %s; %s", rt.cg.Version, parentList(rt.cg.Parents), c.Detail)
		return c
	}
	c.Fix = "run as root, or run msb in a cgroup delegated to you (systemd: systemd-run --user --scope -p Delegate=yes msb ...), " +
		"or set MSB_CGROUP_PARENT to a directory under one (v2 with the memory and pids controllers, or v1 memory and pids " +
		"hierarchies): see \"Rootless limits\" in docs/sandbox.md"
	return c
}

// attachCheck says what moving a sandbox's init into its cgroups costs a
// create (cgroup.Info.AttachWait). A performance note, never a failure:
// the limits hold either way.
func (rt *Runtime) attachCheck() Check {
	c := Check{Name: "cgroup attach", OK: true}
	if !rt.cg.Usable() {
		c.Detail = "no cgroups: nothing to attach"
		return c
	}
	if rt.cloneInto {
		c.Detail = "none: each sandbox's init is cloned into its cgroup (cgroup v2, clone3's CLONE_INTO_CGROUP)"
		return c
	}
	if rt.forkInside {
		c.Detail = "none: each sandbox's init is forked from a thread that moved itself into its cgroups " +
			"(cgroup v1: a thread's own move does not wait for an RCU grace period)"
		return c
	}
	waits, why := rt.cg.AttachWait()
	if !waits {
		c.Detail = "fast: " + why
		return c
	}
	c.Detail = "each create's cgroup move waits for an RCU grace period (up to ~10 ms at p95 here, see docs/bench.md); " +
		"on a node that runs sandboxes, echo 1 > /sys/kernel/rcu_expedited (or, cgroup v2, mount it with favordynmods) removes the wait, " +
		"at a cost to the rest of the system"
	return c
}

func (rt *Runtime) smokeTest(ctx context.Context) Check {
	c := Check{Name: "sandbox (" + rt.Mode() + ")", Required: true}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	sb, err := rt.Create(ctx, Config{HostBase: true})
	if err != nil {
		c.Detail, c.Fix = err.Error(), "see the failed checks above"
		return c
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, session.ExecRequest{Command: "echo ok"})
	if err != nil || strings.TrimSpace(res.Output) != "ok" {
		c.Detail = fmt.Sprintf("command in sandbox: %v %q", err, res.Output)
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("created, ran a command and answered in %s", time.Since(start).Round(time.Microsecond))
	return c
}
