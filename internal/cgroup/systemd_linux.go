package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"
)

// ErrNoSystemd means there is no session bus to ask a systemd user
// manager on (neither DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR/bus).
var ErrNoSystemd = errors.New("no session bus for a systemd user manager")

// The user manager's D-Bus names.
const (
	systemdDest    = "org.freedesktop.systemd1"
	systemdPath    = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdManager = "org.freedesktop.systemd1.Manager"
)

// JoinSystemdScope asks the caller's systemd user manager for a transient
// scope with Delegate=yes and this process alone in it, as `systemd-run
// --user --scope -p Delegate=yes` would have started msb, and returns once
// the process is there. Detect then finds that scope delegated. It returns
// the scope's unit name; ErrNoSystemd when there is no session bus.
func JoinSystemdScope(ctx context.Context) (string, error) {
	addr, err := sessionBus()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("connecting to the session bus %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(systemdManager), dbus.WithMatchMember("JobRemoved")); err != nil {
		return "", fmt.Errorf("subscribing to systemd's job signals: %w", err)
	}
	signals := make(chan *dbus.Signal, 16)
	conn.Signal(signals)
	pid := os.Getpid()
	unit := fmt.Sprintf("msb-%d.scope", pid)
	type property struct {
		Name  string
		Value dbus.Variant
	}
	props := []property{
		{"Description", dbus.MakeVariant("msb and its sandboxes")},
		{"PIDs", dbus.MakeVariant([]uint32{uint32(pid)})},
		{"Delegate", dbus.MakeVariant(true)},
		{"CollectMode", dbus.MakeVariant("inactive-or-failed")},
	}
	var job dbus.ObjectPath
	call := conn.Object(systemdDest, systemdPath).CallWithContext(ctx, systemdManager+".StartTransientUnit", 0,
		unit, "fail", props, []struct {
			Name  string
			Props []property
		}{})
	if err := call.Store(&job); err != nil {
		return "", fmt.Errorf("asking systemd for scope %s: %w", unit, err)
	}
	if err := waitJob(ctx, signals, job); err != nil {
		return "", fmt.Errorf("systemd's job for scope %s: %w", unit, err)
	}
	self, err := selfCgroups()
	if err != nil {
		return "", err
	}
	if filepath.Base(self[""]) != unit {
		return "", fmt.Errorf("systemd started scope %s but this process is in cgroup %s", unit, self[""])
	}
	return unit, nil
}

// sessionBus is the session bus's address: DBUS_SESSION_BUS_ADDRESS, or
// the socket a user manager's session bus has in XDG_RUNTIME_DIR.
func sessionBus() (string, error) {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		p := filepath.Join(d, "bus")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix:path=" + p, nil
		}
	}
	return "", ErrNoSystemd
}

// waitJob waits for systemd's JobRemoved signal of job (id, job, unit,
// result) and fails unless its result is "done".
func waitJob(ctx context.Context, signals <-chan *dbus.Signal, job dbus.ObjectPath) error {
	for {
		select {
		case s, ok := <-signals:
			if !ok {
				return errors.New("the bus connection closed")
			}
			if s.Name != systemdManager+".JobRemoved" || len(s.Body) < 4 || s.Body[1] != job {
				continue
			}
			if result, _ := s.Body[3].(string); result != "done" {
				return fmt.Errorf("ended %q", result)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("no answer: %w", ctx.Err())
		}
	}
}
