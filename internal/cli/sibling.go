package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// FullBinary is the full msb (cmd/msb built without the msblean tag):
// every verb, the engine's cache, datasets, graders and servers included.
// The lean msb runs it for the verbs it does not link (lean.go).
const FullBinary = "msb-full"

// errNoFull: the lean msb cannot find the full one.
var errNoFull = errors.New("this command runs in the full msb, and msb finds no " + FullBinary + " binary")

// A sibling is one of msb's other binaries, found next to msb (make build
// puts them all in bin/), else on PATH; msb runs it in its own place for
// the commands it does not link.
type sibling struct {
	name    string // the binary's file name
	pkg     string // what to build it from, for the error that says so
	missing error  // the error when it is nowhere
}

var (
	benchSibling = sibling{BenchBinary, "./cmd/msb-bench", ErrNoBench}
	fullSibling  = sibling{FullBinary, "./cmd/msb", errNoFull}
)

// path finds s next to msb, else on PATH.
func (s sibling) path() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the msb executable: %w", err)
	}
	next := filepath.Join(filepath.Dir(self), s.name)
	if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return next, nil
	}
	if p, err := exec.LookPath(s.name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w next to msb (%s) or on PATH: build it with make build, or go build -o %s %s",
		s.missing, next, next, s.pkg)
}

// exec runs s with args in place of msb, so that signals, the terminal
// and the exit code are s's own, as if msb linked it; it returns only
// when s could not start.
func (s sibling) exec(args []string) error {
	exe, err := s.path()
	if err != nil {
		return err
	}
	if err := syscall.Exec(exe, append([]string{exe}, args...), os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", exe, err)
	}
	return nil
}
