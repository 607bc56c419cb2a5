package sbinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/seccomp"
	"golang.org/x/sys/unix"
)

// StageProbe runs one kernel-feature probe (msb doctor) in the namespaces
// the parent created, and exits 0 when the feature works.
const StageProbe = "probe"

// EnvProbe names the probe to run.
const EnvProbe = "MSB_PROBE"

// Probes by name. Each runs in a child already placed in the namespaces the
// doctor asked for.
var probes = map[string]func() error{
	"true":       func() error { return nil },
	"overlay":    probeOverlay,
	"pivot_root": probePivot,
	"seccomp":    func() error { return seccomp.Install(seccomp.Build()) },
	"whiteouts":  probeWhiteouts,
}

func probeMain() error {
	p, ok := probes[os.Getenv(EnvProbe)]
	if !ok {
		return fmt.Errorf("unknown probe %q", os.Getenv(EnvProbe))
	}
	return p()
}

// probeOverlay mounts an overlay with an upper dir in a fresh temp dir (on
// a tmpfs with MSB_PROBE_TMPFS=1; with userxattr when not root on the host)
// and writes through it.
func probeOverlay() error {
	dir, err := os.MkdirTemp(os.Getenv("MSB_PROBE_DIR"), "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if os.Getenv("MSB_PROBE_TMPFS") == "1" {
		// The upper and work dirs on a tmpfs, as a sandbox's bounded
		// writable layer has them.
		if err := mount.Tmpfs(dir, 0, "size=1m").Mount(); err != nil {
			return err
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
	}
	for _, d := range []string{"l", "u", "w", "m"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	m, err := mount.Overlay(filepath.Join(dir, "m"), mount.OverlayOptions{
		Lowers: []string{filepath.Join(dir, "l")}, Upper: filepath.Join(dir, "u"), Work: filepath.Join(dir, "w"),
		UserXattr: os.Getenv("MSB_PROBE_USERXATTR") == "1",
	})
	if err != nil {
		return err
	}
	if err := m.Mount(); err != nil {
		return err
	}
	defer unix.Unmount(m.Target, unix.MNT_DETACH)
	return os.WriteFile(filepath.Join(m.Target, "f"), []byte("x"), 0o644)
}

// EnvProbeHostDirs and EnvProbeMasks name the host dirs and the masks
// (absolute paths, one a line) the whiteouts probe hides them in.
const (
	EnvProbeHostDirs = "MSB_PROBE_HOST_DIRS"
	EnvProbeMasks    = "MSB_PROBE_MASKS"
)

// probeWhiteouts makes, in a tmpfs of its own, each host dir holding masks
// as a sandbox that reads the host dirs as root has it: an overlay hiding
// them (overlayHidden). It fails where overlayfs refuses one as a layer,
// where a sandbox masks them by mounts over the files instead.
func probeWhiteouts() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	root, err := os.MkdirTemp(os.Getenv("MSB_PROBE_DIR"), "whiteouts-")
	if err != nil {
		return err
	}
	defer os.Remove(root)
	if err := mount.Tmpfs(root, 0, "size=64k").Mount(); err != nil {
		return err
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	masks := strings.Split(os.Getenv(EnvProbeMasks), "\n")
	for _, d := range strings.Split(os.Getenv(EnvProbeHostDirs), "\n") {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue // absent, or a symlink: as hostDir
		}
		if hidden := masksUnder(d, masks); len(hidden) > 0 {
			if err := overlayHidden(root, d, hidden); err != nil {
				return err
			}
		}
	}
	return nil
}

// probePivot pivots into a tmpfs.
func probePivot() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	dir, err := os.MkdirTemp(os.Getenv("MSB_PROBE_DIR"), "pivot-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := mount.Tmpfs(dir, 0, "size=64k").Mount(); err != nil {
		return err
	}
	return pivot(dir)
}

// StageHold keeps a process alive until its stdin ends: msb starts one in a
// new user namespace, opens /proc/<pid>/ns/user and lets it go, which is how
// it gets a user namespace (for idmapped mounts) without a process to keep.
const StageHold = "hold"

func holdMain() error {
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}
