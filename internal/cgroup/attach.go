package cgroup

import (
	"os"
	"strings"
)

// AttachWait says whether moving a process into a group (Group.Add) waits
// for an RCU grace period, and why. The move takes the kernel's
// cgroup_threadgroup_rwsem for writing, which waits for a grace period
// unless another move happened moments before, or the kernel expedites
// grace periods (kernel.rcu_expedited), or (v2) the hierarchy is mounted
// with favordynmods.
func (i Info) AttachWait() (waits bool, why string) {
	expedited, _ := os.ReadFile("/sys/kernel/rcu_expedited")
	mounts, _ := os.ReadFile("/proc/self/mounts")
	return attachWait(i.Version, string(expedited), string(mounts))
}

// attachWait is AttachWait from the contents of /sys/kernel/rcu_expedited
// and /proc/self/mounts.
func attachWait(v Version, expedited, mounts string) (bool, string) {
	if e := strings.TrimSpace(expedited); e != "" && e != "0" {
		return false, "RCU grace periods are expedited (kernel.rcu_expedited)"
	}
	if v == V2 && favorsDynMods(mounts) {
		return false, "cgroup2 is mounted with favordynmods"
	}
	return true, "a move waits for an RCU grace period unless another came moments before"
}

// favorsDynMods reports whether a cgroup2 mount in mounts (the format of
// /proc/self/mounts) has the favordynmods option.
func favorsDynMods(mounts string) bool {
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "cgroup2" && strings.Contains(","+f[3]+",", ",favordynmods,") {
			return true
		}
	}
	return false
}
