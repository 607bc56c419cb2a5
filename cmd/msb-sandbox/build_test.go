package main

import (
	"debug/buildinfo"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestBuiltWithoutGreenTea: make build gives bin/msb-sandbox Go's previous
// garbage collector (the Makefile's SANDBOX_GOEXPERIMENT), which leaves an
// idle supervisor 0.08 MiB smaller (docs/bench.md, 2026-12-05). make test
// builds first; a go test without it finds no binary and skips.
func TestBuiltWithoutGreenTea(t *testing.T) {
	const bin = "../../bin/msb-sandbox"
	info, err := buildinfo.ReadFile(bin)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not built (make build makes it)", bin)
	}
	if err != nil {
		t.Fatalf("reading the build info of %s: %v", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "GOEXPERIMENT" && strings.Contains(s.Value, "nogreenteagc") {
			return
		}
	}
	t.Fatalf("%s was built with the green tea collector (%s): build it with make build, which sets GOEXPERIMENT=nogreenteagc", bin, info.GoVersion)
}
