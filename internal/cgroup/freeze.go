package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoFreezer means the group cannot be frozen: a v1 hierarchy without
// the freezer controller mounted or delegated.
var ErrNoFreezer = errors.New("cgroup has no freezer")

// Freeze stops every process of the group (cgroup.freeze on v2, the v1
// freezer's FROZEN state) and waits until the kernel says they all are
// stopped, or ctx ends. A frozen process stays frozen until Thaw, even
// past this process's exit: call Thaw on every path once Freeze was
// called, also when it failed.
func (g *Group) Freeze(ctx context.Context) error {
	file, value, done, err := g.freezeFile(true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("freezing cgroup: writing %q to %s: %w", value, file, err)
	}
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("freezing cgroup %s: %w", filepath.Dir(file), err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("freezing cgroup %s: %w", filepath.Dir(file), ctx.Err())
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// Thaw lets the group's processes run again; thawing a group that is not
// frozen does nothing.
func (g *Group) Thaw() error {
	file, value, _, err := g.freezeFile(false)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("thawing cgroup: writing %q to %s: %w", value, file, err)
	}
	return nil
}

// freezeFile is the file that freezes (freeze true) or thaws the group,
// the value to write, and a check that the kernel is done freezing.
func (g *Group) freezeFile(freeze bool) (file, value string, done func() (bool, error), err error) {
	if g.info.Version == V2 {
		dir := g.dirs[""]
		value = "0"
		if freeze {
			value = "1"
		}
		events := filepath.Join(dir, "cgroup.events")
		return filepath.Join(dir, "cgroup.freeze"), value, func() (bool, error) {
			b, err := os.ReadFile(events)
			return strings.Contains("\n"+string(b), "\nfrozen 1"), err
		}, nil
	}
	dir := g.dirs["freezer"]
	if dir == "" {
		return "", "", nil, fmt.Errorf("%w: the cgroup v1 freezer controller is not mounted or not delegated", ErrNoFreezer)
	}
	value = "THAWED"
	if freeze {
		value = "FROZEN"
	}
	state := filepath.Join(dir, "freezer.state")
	return state, value, func() (bool, error) {
		b, err := os.ReadFile(state)
		return strings.TrimSpace(string(b)) == "FROZEN", err
	}, nil
}

// thawV1 thaws dir when it is a v1 freezer group, as a group left frozen
// by a process that died mid-freeze is.
func thawV1(dir string) {
	state := filepath.Join(dir, "freezer.state")
	if _, err := os.Stat(state); err == nil {
		os.WriteFile(state, []byte("THAWED"), 0)
	}
}
