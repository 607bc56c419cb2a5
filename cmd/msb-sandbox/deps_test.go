package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLeavesOutCrypto: msb-sandbox, which every sandbox starts, links no
// crypto package: crypto/rand alone brought the FIPS module and math/big,
// 15 package inits of each sandbox's start (docs/bench.md, session 18).
// The session's nonces read getrandom(2) directly (session.newNonce).
func TestLeavesOutCrypto(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/msb-sandbox: %v", err)
	}
	ds := strings.Fields(string(out))
	if !slices.Contains(ds, "github.com/minisandbox/msb/internal/session") {
		t.Fatalf("go list -deps ./cmd/msb-sandbox lacks internal/session: %q", ds)
	}
	for _, p := range ds {
		if p == "crypto" || strings.HasPrefix(p, "crypto/") || p == "math/big" {
			t.Errorf("msb-sandbox links %s: a sandbox's start pays for its package inits", p)
		}
	}
}
