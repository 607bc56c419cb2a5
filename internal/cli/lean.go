//go:build msblean

package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine/host"
)

// This file makes the lean msb (make build: cmd/msb with -tags msblean):
// the verbs that start sandboxes on the host (run, shell), talk to the
// daemon (sandbox, exec, session, cp, snapshot) or look after the host
// (doctor, gc, version) link only the sandbox layer (package engine/host),
// the client and the API types, so that msb starts in a fraction of a
// millisecond (docs/bench.md). The verbs that need the engine run the
// full msb, msb-full, in msb's place with the same arguments (full.go
// lists them); msb run does too when --image names the sandbox's root.

// fullVerbs are the verbs of fullCmds with their one-line help, as
// msb --help lists them (TestLeanHelp checks they match).
var fullVerbs = []struct{ name, short string }{
	{"cache", "Build, inspect and move the environment cache (layers of environments and repositories)"},
	{"demo", "The main job on an embedded default, offline: sandboxes, sessions, cache, validation and grading"},
	{"eval", "Grade predictions exactly as the SWE-bench harness does, each in a fresh sandbox"},
	{"integrity", "Reward integrity: the static check of patches (docs/integrity.md)"},
	{"serve", "Run the daemon: the HTTP API (native /v1, SWE-ReX-compatible, gym) over one engine"},
	{"spec", "Specs: how an instance is built and tested"},
	{"validate", "Admit instances for RL: the gold patch must resolve, an empty patch must not"},
}

// fullCmds are forwarders to msb-full, one for each verb it has and the
// lean msb has not.
func fullCmds(g *globals) []*cobra.Command {
	cmds := make([]*cobra.Command, 0, len(fullVerbs))
	for _, v := range fullVerbs {
		cmds = append(cmds, &cobra.Command{
			Use:   v.name,
			Short: v.short,
			Long: v.short + `.

This msb runs ` + FullBinary + ` for it (the one next to msb, else the one on PATH; make build builds both
into bin/), so that msb run and the client verbs do not link the engine. msb ` + v.name + ` --help
shows its commands and flags.`,
			DisableFlagParsing: true,
			// msb-full resolves the settings, from the same arguments.
			PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
			RunE: func(*cobra.Command, []string) error {
				return fullSibling.exec(g.args)
			},
			// Shell completion (msb __complete VERB ...) is msb-full's too.
			ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if err := fullSibling.exec(g.args); err != nil {
					cobra.CompDebugln(err.Error(), true)
				}
				return nil, cobra.ShellCompDirectiveError
			},
		})
	}
	return cmds
}

// errKind is the sandbox layer's class of an error (host.Kinds): the lean
// msb meets no error of the engine's.
var errKind = host.Kinds.Kind

// cacheEnviron is empty: the lean msb has no environment cache.
type cacheEnviron struct{}

func readCacheEnviron(func(string) string) cacheEnviron { return cacheEnviron{} }

// defaultCacheDir is "": no verb of the lean msb opens the cache, and
// msb-full resolves it for those that do.
func defaultCacheDir(string) string { return "" }

// applyImage runs msb-full in msb's place when --image (or --base) names
// the sandbox's root, which comes from the environment cache; without it,
// there is nothing to apply.
func (f *specFlags) applyImage(_ context.Context, g *globals, _ *host.SandboxConfig) (func(), error) {
	if f.image == "" {
		return func() {}, nil
	}
	return nil, fullSibling.exec(g.args)
}
