package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeavesOutTheBenchmark: the msb binary links neither the benchmark
// (internal/bench and its commands) nor its plotting (gonum.org/v1/plot);
// msb bench runs cmd/msb-bench instead.
func TestLeavesOutTheBenchmark(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/msb: %v", err)
	}
	deps := strings.Fields(string(out))
	if !contains(deps, "github.com/minisandbox/msb/internal/cli") {
		t.Fatalf("go list -deps ./cmd/msb lacks internal/cli: %q", deps)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/minisandbox/msb/internal/bench") || strings.HasPrefix(p, "gonum.org/") {
			t.Errorf("msb links %s, which belongs to msb-bench", p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
