// Package demotest is the test fixture shared by the packages whose tests
// run sandboxes of the demo project (engine, task, server): a Fixture is
// the demo project generated once per test binary, in a directory under
// privtest's state base, and Main is those binaries' TestMain: the sandbox
// stages, the tests, then the fixture removed and the leak check.
package demotest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// Fixture is the demo project of one test binary, made on first use.
type Fixture struct {
	prefix  string // of its directory's name
	once    sync.Once
	dir     string
	gen     *demo.Generated
	err     error
	mu      sync.Mutex
	closers []func() error
}

// New is a fixture whose directory is named prefix plus a random suffix.
func New(prefix string) *Fixture { return &Fixture{prefix: prefix} }

// Generated is the demo project (dataset, instances, specs), generated on
// the first call; the test fails if it cannot be.
func (f *Fixture) Generated(t testing.TB) *demo.Generated {
	t.Helper()
	f.once.Do(func() {
		if f.dir, f.err = os.MkdirTemp(os.Getenv(privtest.StateBaseEnv), f.prefix); f.err == nil {
			f.gen, f.err = demo.Generate(context.Background(), filepath.Join(f.dir, "gen"))
		}
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.gen
}

// Dir is the fixture's directory (Generated must have been called): what
// the tests share besides the project, e.g. a cache, goes there.
func (f *Fixture) Dir() string { return f.dir }

// OnClose registers what Main closes, last registered first, before it
// removes the directory (e.g. a runtime the tests share).
func (f *Fixture) OnClose(close func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closers = append(f.closers, close)
}

func (f *Fixture) close() error {
	var errs []error
	for i := len(f.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.closers[i]())
	}
	if f.dir != "" {
		errs = append(errs, sandbox.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}

// Main is TestMain of a binary with fixture f: the binary serves as the
// sandbox's init when re-executed as one; after the tests f is closed and
// removed and, if they passed, no sandbox or mount may have outlived them.
func Main(m *testing.M, f *Fixture) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	os.Exit(privtest.RunChecked(m, privtest.Checks{OwnPool: true, After: func() error {
		if err := f.close(); err != nil {
			return fmt.Errorf("removing the fixture: %w", err)
		}
		return nil
	}}))
}
