package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrUnavailable says that no usable CRIU is here: none found, one older
// than 4.0, or one whose "criu check" fails on this kernel.
var ErrUnavailable = errors.New("no usable criu")

// ErrCheck, beside ErrUnavailable, says that criu is there but "criu
// check" fails: the kernel lacks what it needs.
var ErrCheck = errors.New("criu check failed")

// Criu is one criu binary that passed its check here.
type Criu struct {
	Path    string
	Version string // "4.1.1"
}

var versionLine = regexp.MustCompile(`(?m)^Version: (\d+)\.(\d+)(\.\d+)?`)

// Find returns the criu at path (found on PATH when "") once it says it
// is 4.0 or newer and "criu check" passes; else an error wrapping
// ErrUnavailable that says which.
func Find(ctx context.Context, path string) (*Criu, error) {
	if path == "" {
		p, err := exec.LookPath("criu")
		if err != nil {
			return nil, fmt.Errorf("%w: criu is not on PATH (.ci/deps builds 4.1.1)", ErrUnavailable)
		}
		path = p
	}
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %s --version: %v: %s", ErrUnavailable, path, err, bytes.TrimSpace(out))
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%w: %s --version printed no version: %q", ErrUnavailable, path, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	version := strings.TrimPrefix(string(m[0]), "Version: ")
	if major < 4 {
		return nil, fmt.Errorf("%w: %s is criu %s; 4.0 or newer is needed (3.17.1 fails its check on kernel 6.18: vDSO)", ErrUnavailable, path, version)
	}
	out, err = exec.CommandContext(ctx, path, "check").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %s check: %v: %s", ErrUnavailable, ErrCheck, path, err, bytes.TrimSpace(out))
	}
	return &Criu{Path: path, Version: version}, nil
}

// run runs criu with args and, when it fails, returns an error with the
// log's error lines (criu writes its reasons there, not to stderr).
//
// criu runs in a process group of its own, killed once it exits: a criu
// killed or failed halfway leaves helpers (its cgroupd) and tasks it was
// restoring that still hold its output pipe, and without the kill and
// WaitDelay the call waited for them forever (TestForkCancelledInRestore
// in package engine). Tasks it restored are in their own groups by then.
func (c *Criu) run(ctx context.Context, what, logPath string, args []string, extra func(*exec.Cmd)) error {
	cmd := exec.CommandContext(ctx, c.Path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if extra != nil {
		extra(cmd)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("criu %s: %w: %s%s", what, err, bytes.TrimSpace(out.Bytes()), logErrors(logPath))
}
