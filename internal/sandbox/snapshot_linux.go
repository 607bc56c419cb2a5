package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

// ErrNoWritableDir means the sandbox's writable layer cannot be read from
// the host: a rootless sandbox's disk tmpfs is mounted only in its own
// mount namespace, and a copy-mode sandbox has no layer of its own.
var ErrNoWritableDir = errors.New("sandbox's writable layer is not reachable from the host")

// Config is the configuration the sandbox was created with (a copy): a
// sandbox made from it, with layers added on top, is a fork.
func (s *Sandbox) Config() Config {
	c := s.conf
	c.Layers = slices.Clone(c.Layers)
	c.HostDirs = slices.Clone(c.HostDirs)
	c.Binds = slices.Clone(c.Binds)
	c.Env = slices.Clone(c.Env)
	c.Stdio = nil
	return c
}

// WritableDir is the host path of the sandbox's overlay upper dir: the
// caller's or private host directory, or the upper dir in the sandbox's
// volume of the disk pool (a path that means something in this process
// only). It is ErrNoWritableDir for a disk tmpfs or copy mode.
func (s *Sandbox) WritableDir() (string, error) {
	switch {
	case s.upper != "":
		return s.upper, nil
	case s.volume != nil:
		return filepath.Join(s.volume.Path(), "upper"), nil
	case s.conf.RootDir != "":
		return "", fmt.Errorf("%w: a copy-mode sandbox writes into its root dir", ErrNoWritableDir)
	}
	return "", fmt.Errorf("%w: its upper dir is on a tmpfs mounted in the sandbox's namespace only", ErrNoWritableDir)
}

// Freeze stops every process of the sandbox (see cgroup.Group.Freeze)
// until thaw is called, which must be done on every path, also after an
// error. Without a cgroup it fails with ErrNoCgroup.
func (s *Sandbox) Freeze(ctx context.Context) (thaw func() error, err error) {
	if s.cg == nil {
		return func() error { return nil }, ErrNoCgroup
	}
	thaw = s.cg.Thaw
	if err := s.cg.Freeze(ctx); err != nil {
		return thaw, fmt.Errorf("freezing sandbox %s: %w", s.ID, err)
	}
	return thaw, nil
}
