package sbinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// sysFlags are those of /sys and of what is mounted below it: read-only,
// as a container's (a process of the sandbox may read its cgroup's
// limits and usage, never change them).
const sysFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// sysMasks hide what sysfs tells of the host's firmware (ACPI tables, EFI
// variables) and power use (the energy counters of powercap, a side
// channel), as container runtimes do.
var sysMasks = []string{"/sys/firmware", "/sys/devices/virtual/powercap"}

// cgroupDir is where the sandbox's cgroup is mounted (see mountCgroups).
const cgroupDir = "/sys/fs/cgroup"

// mountSys mounts /sys inside root, read-only: a sysfs, which shows the
// network devices of the sandbox's own namespace, or, where the sandbox may
// not mount one (rootless with the host's network: that namespace is not
// its user namespace's), an empty tmpfs holding only fs/cgroup. On cgroup
// v1 it then mounts at fs/cgroup a read-only tmpfs holding a directory per
// hierarchy, on which mountCgroups mounts them.
func mountSys(root string, cfg *wire.Config) error {
	sys := filepath.Join(root, "sys")
	err := mkdirMount(mount.Mount{Source: "sysfs", Target: sys, FSType: "sysfs", Flags: sysFlags})
	if errors.Is(err, unix.EPERM) {
		err = readOnlyTmpfs(sys, cfg, []string{"fs", "fs/cgroup"}, nil)
	}
	if err != nil {
		return fmt.Errorf("mounting /sys: %w", err)
	}
	for _, m := range sysMasks {
		if err := mask(root, m); err != nil {
			return err
		}
	}
	if cfg.Cgroup == nil || cfg.Cgroup.V2 {
		return nil
	}
	var dirs []string
	links := map[string]string{}
	for _, h := range cfg.Cgroup.Hierarchies {
		dirs = append(dirs, h.Dir)
		for _, l := range h.Links {
			links[l] = h.Dir
		}
	}
	if err := readOnlyTmpfs(filepath.Join(root, cgroupDir), cfg, dirs, links); err != nil {
		return fmt.Errorf("mounting the cgroup hierarchies' tmpfs: %w", err)
	}
	return nil
}

// readOnlyTmpfs mounts at target a tmpfs holding dirs and symlinks (name:
// target), then makes it read-only.
func readOnlyTmpfs(target string, cfg *wire.Config, dirs []string, links map[string]string) error {
	if err := mkdirMount(mount.Tmpfs(target, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, tmpfsData(cfg, "755", 64<<10))); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(target, d), 0o755); err != nil {
			return err
		}
	}
	for name, to := range links {
		if err := os.Symlink(to, filepath.Join(target, name)); err != nil {
			return err
		}
	}
	return mount.Mount{Target: target, Flags: unix.MS_REMOUNT | unix.MS_BIND | sysFlags}.Mount()
}

// mountCgroups mounts the sandbox's cgroup at /sys/fs/cgroup, read-only.
// It runs on init's thread once that thread is in the sandbox's cgroup
// namespace, after the pivot: a cgroup filesystem mounted there shows the
// namespace's root, the sandbox's own group, at its top.
func mountCgroups(c *wire.CgroupFS) error {
	if c == nil {
		return nil
	}
	if c.V2 {
		m := mount.Mount{Source: "cgroup2", Target: cgroupDir, FSType: "cgroup2", Flags: sysFlags}
		if err := m.Mount(); err != nil {
			return fmt.Errorf("mounting the sandbox's cgroup: %w", err)
		}
		return nil
	}
	for _, h := range c.Hierarchies {
		m := mount.Mount{Source: "cgroup", Target: filepath.Join(cgroupDir, h.Dir), FSType: "cgroup", Flags: sysFlags, Data: h.Options}
		if err := m.Mount(); err != nil {
			return fmt.Errorf("mounting the sandbox's cgroup v1 %s hierarchy: %w", h.Options, err)
		}
	}
	return nil
}
