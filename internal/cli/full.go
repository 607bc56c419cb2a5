//go:build !msblean

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
)

// This file and the others built without the msblean tag make the full
// msb: every verb in one binary, installed as msb-full (make build), or as
// msb itself by a plain go build ./cmd/msb. The lean msb (lean.go) has
// the same verbs, but runs msb-full for these.

// fullCmds are the verbs that need the engine: its environment cache,
// datasets and specs, graders, or the daemon's servers.
func fullCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{newCacheCmd(g), newDemoCmd(g), newEvalCmd(g), newIntegrityCmd(g), newServeCmd(g), newSpecCmd(g), newValidateCmd(g)}
}

// errKind is the engine's class of an error (engine.Kind).
var errKind = engine.Kind

// cacheEnviron is what the environment cache reads from the environment.
type cacheEnviron struct {
	// Pythons: where interpreters are searched for (PATH, HOME,
	// PYENV_ROOT, UV_PYTHON_INSTALL_DIR)
	Pythons envcache.PythonSearch
	// Toolchains: where toolchains are searched for (PATH, MSB_TOOLCHAIN_<NAME>)
	Toolchains envcache.ToolchainSearch
}

func readCacheEnviron(get func(string) string) cacheEnviron {
	return cacheEnviron{
		Pythons:    envcache.PythonSearch{Path: filepath.SplitList(get("PATH")), Home: get("HOME"), PyenvRoot: get("PYENV_ROOT"), UVDir: get("UV_PYTHON_INSTALL_DIR")},
		Toolchains: envcache.ToolchainSearchFromEnv(get),
	}
}

// defaultCacheDir is the environment cache's directory when none is named.
func defaultCacheDir(userCacheDir string) string { return envcache.DefaultDir(userCacheDir) }

// openEngine opens the engine with the settings and o's changes, and says
// what it cleaned up after killed msb processes.
func (g *globals) openEngine(ctx context.Context, o engineOptions) (*engine.Engine, error) {
	cfg, err := g.settings.engineConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.Logger = g.logger()
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sayCollected(e.GCReport())
	return e, nil
}

// closeEngine closes a batch command's engine and says on stderr what the
// close could not do (a disk pool left mounted, a sandbox not cleaned up):
// the command's own result stands.
func closeEngine(e *engine.Engine, verb string) {
	if err := e.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "msb %s: %v\n", verb, err)
	}
}

// EngineConfig is the engine's config from the settings (config file,
// environment, global flags).
func (h BenchHost) EngineConfig() (engine.Config, error) {
	cfg, err := h.g.settings.engineConfig(engineOptions{})
	cfg.Logger = h.g.logger()
	return cfg, err
}
