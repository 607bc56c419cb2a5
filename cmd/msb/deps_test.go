package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeavesOutTheBenchmark: neither msb binary, the lean one (-tags
// msblean) nor the full one, links the benchmark (internal/bench and its
// commands) or its plotting (gonum.org/v1/plot); msb bench runs
// cmd/msb-bench instead.
func TestLeavesOutTheBenchmark(t *testing.T) {
	for _, tags := range []string{"", leanTag} {
		for _, p := range deps(t, tags) {
			if strings.HasPrefix(p, "github.com/minisandbox/msb/internal/bench") || strings.HasPrefix(p, "gonum.org/") {
				t.Errorf("msb (tags %q) links %s, which belongs to msb-bench", tags, p)
			}
		}
	}
}

// leanTag builds the lean msb, the binary msb run and the client verbs
// execute (make build); the full msb, msb-full, is cmd/msb without it.
const leanTag = "msblean"

// heavy are the packages the lean msb must not link, by import path
// prefix: the engine above its Host and what only it uses (the cache,
// images, specs, datasets, graders, the daemon's servers), and the
// libraries they bring, whose package inits ran at every start of msb
// (GODEBUG=inittrace=1; docs/bench.md).
var heavy = []string{
	"github.com/minisandbox/msb/internal/engine", // but not internal/engine/host: see leanAllowed
	"github.com/minisandbox/msb/internal/envcache",
	"github.com/minisandbox/msb/internal/rootfs",
	"github.com/minisandbox/msb/internal/spec",
	"github.com/minisandbox/msb/internal/dataset",
	"github.com/minisandbox/msb/internal/grading",
	"github.com/minisandbox/msb/internal/harness",
	"github.com/minisandbox/msb/internal/task",
	"github.com/minisandbox/msb/internal/server",
	"github.com/minisandbox/msb/internal/demo",
	"github.com/minisandbox/msb/internal/warm",
	"github.com/minisandbox/msb/internal/store", // the tree stage's writer: engine sets sbinit.WriteTree
	"github.com/klauspost/compress",
	"encoding/gob",
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"connectrpc.com/",
	"github.com/parquet-go/",
	"github.com/google/go-containerregistry/",
	"github.com/opencontainers/",
	"github.com/andybalholm/brotli",
	"github.com/schollz/progressbar/",
	"gonum.org/",
}

// leanAllowed are packages under a prefix of heavy that the lean msb
// needs: the sandbox runtime alone.
var leanAllowed = []string{"github.com/minisandbox/msb/internal/engine/host"}

// TestLeanLeavesOutTheEngine: the lean msb links none of heavy, and it
// does link the CLI and the Host (so that the list is about the binary
// msb run executes, not an empty one).
func TestLeanLeavesOutTheEngine(t *testing.T) {
	ds := deps(t, leanTag)
	for _, want := range []string{"github.com/minisandbox/msb/internal/cli", leanAllowed[0]} {
		if !contains(ds, want) {
			t.Fatalf("go list -tags %s -deps ./cmd/msb lacks %s", leanTag, want)
		}
	}
	for _, p := range ds {
		if contains(leanAllowed, p) {
			continue
		}
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				t.Errorf("the lean msb links %s (under %s): msb run and the client verbs must not; "+
					"a verb that needs it belongs in internal/cli's full build (full.go), which msb runs as msb-full", p, h)
			}
		}
	}
}

// deps is go list -deps of cmd/msb built with tags.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -tags %q -deps ./cmd/msb: %v", tags, err)
	}
	ds := strings.Fields(string(out))
	if !contains(ds, "github.com/minisandbox/msb/internal/cli") {
		t.Fatalf("go list -tags %q -deps ./cmd/msb lacks internal/cli: %q", tags, ds)
	}
	return ds
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
