package cgroup

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

func TestWaitJob(t *testing.T) {
	const job = dbus.ObjectPath("/org/freedesktop/systemd1/job/7")
	removed := func(path dbus.ObjectPath, result string) *dbus.Signal {
		return &dbus.Signal{Name: systemdManager + ".JobRemoved", Body: []any{uint32(7), path, "msb-1.scope", result}}
	}
	for _, c := range []struct {
		name    string
		signals []*dbus.Signal
		err     string // "" for success
	}{
		{"done", []*dbus.Signal{removed(job, "done")}, ""},
		{"another job first", []*dbus.Signal{removed("/org/freedesktop/systemd1/job/6", "failed"), removed(job, "done")}, ""},
		{"another signal first", []*dbus.Signal{{Name: systemdManager + ".UnitNew", Body: []any{"x", job}}, removed(job, "done")}, ""},
		{"failed", []*dbus.Signal{removed(job, "failed")}, `ended "failed"`},
		{"no answer", nil, "no answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := make(chan *dbus.Signal, len(c.signals))
			for _, s := range c.signals {
				ch <- s
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := waitJob(ctx, ch, job)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
		})
	}
}

func TestSessionBus(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if _, err := sessionBus(); !errors.Is(err, ErrNoSystemd) {
		t.Fatalf("no socket: err %v, want ErrNoSystemd", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if a, err := sessionBus(); err != nil || a != "unix:path="+filepath.Join(dir, "bus") {
		t.Fatalf("socket in XDG_RUNTIME_DIR: %q, %v", a, err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/elsewhere")
	if a, _ := sessionBus(); a != "unix:path=/elsewhere" {
		t.Fatalf("DBUS_SESSION_BUS_ADDRESS not first: %q", a)
	}
}
