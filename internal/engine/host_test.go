package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// openHost opens a Host on a state dir of the test's own, closed after it.
func openHost(t *testing.T) *Host {
	t.Helper()
	h, err := OpenHost(HostConfig{StateDir: privtest.StateDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// TestEngineHostRun: Host.Run passes a command's output and exit code
// through, and a command the sandbox cannot start is a StartError with a
// shell's code.
func TestEngineHostRun(t *testing.T) {
	h := openHost(t)
	var out bytes.Buffer
	res, err := h.Run(context.Background(), SandboxConfig{HostBase: true, Stdio: &Stdio{Out: &out}}, []string{"sh", "-c", "echo hi; exit 3"})
	if err != nil || res.Code != 3 || out.String() != "hi\n" || res.OOMKills != 0 {
		t.Errorf("Run(echo hi; exit 3) = %+v, %v with output %q; want code 3, output hi", res, err, out.String())
	}
	res, err = h.Run(context.Background(), SandboxConfig{HostBase: true}, []string{"no-such-program"})
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeNoCommand || res.Code != CodeNoCommand || se.Msg == "" {
		t.Errorf("Run(no-such-program) = %+v, %v; want a StartError of code %d", res, err, CodeNoCommand)
	}
	// Rootless, the wrapper that sets the rlimits execs the command and
	// exits 126 itself, which is no error of the sandbox's: the code is
	// the same either way.
	res, err = h.Run(context.Background(), SandboxConfig{HostBase: true}, []string{"/etc/hostname"})
	if res.Code != CodeNotExecutable || err != nil && (!errors.As(err, &se) || se.Code != CodeNotExecutable) {
		t.Errorf("Run(/etc/hostname) = %+v, %v; want code %d, any error a StartError", res, err, CodeNotExecutable)
	}
}

// TestEngineHostRefusesABadConfig: a config that cannot be built is
// ErrInvalidConfig, the sentinel front ends map to their own answer.
func TestEngineHostRefusesABadConfig(t *testing.T) {
	h := openHost(t)
	_, err := h.Run(context.Background(), SandboxConfig{HostBase: true, Network: "bridge"}, []string{"true"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Run with network bridge: %v, want ErrInvalidConfig", err)
	}
}

// TestEngineHostDoctor: on a host that runs the tests' sandboxes, every
// required check passes, and the report names the mode and the state dir.
func TestEngineHostDoctor(t *testing.T) {
	h := openHost(t)
	d := h.Doctor(context.Background())
	for _, c := range d.Checks {
		if c.Required && !c.OK {
			t.Errorf("required check %s failed: %s", c.Name, c.Detail)
		}
	}
	if !d.OK || len(d.Checks) == 0 || d.Mode == "" || d.StateDir != h.Runtime().StateDir() || d.Init == "" {
		t.Errorf("Doctor = %+v; want OK with checks, mode, state dir and init", d)
	}
}
