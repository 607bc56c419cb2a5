package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoFreezer means the group cannot be frozen: a v1 hierarchy without
// the freezer controller mounted or delegated.
var ErrNoFreezer = errors.New("cgroup has no freezer")

// ErrFreezeTimeout means the group's processes did not all stop within
// freezeTimeout.
var ErrFreezeTimeout = errors.New("cgroup did not freeze in time")

// freezeTimeout bounds a freeze; a v1 group still FREEZING is thawed and
// frozen again after freezeRetry, then after twice as long each time, up
// to maxFreezeRetry (a large group may just need longer).
const (
	freezeTimeout  = 10 * time.Second
	freezeRetry    = 2 * time.Millisecond
	maxFreezeRetry = 200 * time.Millisecond
)

// Freeze stops every process of the group (cgroup.freeze on v2, the v1
// freezer's FROZEN state) and waits until the kernel says they all are
// stopped, ctx ends, or freezeTimeout passes (ErrFreezeTimeout). A v1
// group can stay FREEZING for good: a parent in vfork waits for a child
// that was frozen first. So while it is not FROZEN, it is thawed and
// frozen again, after freezeRetry and then less and less often. A frozen
// process stays frozen until Thaw, even past this process's exit: call
// Thaw on every path once Freeze was called, also when it failed.
func (g *Group) Freeze(ctx context.Context) error {
	file, value, done, err := g.freezeFile(true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("freezing cgroup: writing %q to %s: %w", value, file, err)
	}
	start, retried, wait := time.Now(), time.Now(), freezeRetry
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("freezing cgroup %s: %w", filepath.Dir(file), err)
		}
		if ok {
			return nil
		}
		if time.Since(start) > freezeTimeout {
			return fmt.Errorf("freezing cgroup %s: %w (%s)", filepath.Dir(file), ErrFreezeTimeout, freezeTimeout)
		}
		if g.info.Version != V2 && time.Since(retried) > wait {
			if err := g.refreezeV1(file); err != nil {
				return err
			}
			retried, wait = time.Now(), min(2*wait, maxFreezeRetry)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("freezing cgroup %s: %w", filepath.Dir(file), err)
		}
		// A nanosleep of the thread: the runtime's timers make a wait
		// this short a millisecond, longer than most freezes take.
		unix.Nanosleep(&unix.Timespec{Nsec: int64(freezePoll)}, nil)
	}
}

// freezePoll is how often Freeze looks whether the kernel is done.
const freezePoll = 50 * time.Microsecond

// refreezeV1 thaws a v1 group stuck FREEZING and freezes it again, which
// lets a task the freezer could not stop (a vfork parent) go on first.
func (g *Group) refreezeV1(state string) error {
	for _, v := range []string{"THAWED", "FROZEN"} {
		if err := os.WriteFile(state, []byte(v), 0); err != nil {
			return fmt.Errorf("freezing cgroup: writing %q to %s: %w", v, state, err)
		}
	}
	return nil
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

// FreezerDir is the dir of the group that Freeze freezes: the v1
// freezer's, or the v2 group's; "" when it has none.
func (g *Group) FreezerDir() string {
	if g.info.Version == V2 {
		return g.dirs[""]
	}
	return g.dirs["freezer"]
}
