package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMsbExecutable: msb bench api measures the daemon of the msb on PATH
// when none sits next to msb-bench (here, the test binary), and says what
// to build when there is none.
func TestMsbExecutable(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := msbExecutable(); !errors.Is(err, errNoMsb) {
		t.Fatalf("no msb anywhere: got %v, want errNoMsb", err)
	}
	msb := filepath.Join(dir, "msb")
	if err := os.WriteFile(msb, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := msbExecutable()
	if err != nil || got != msb {
		t.Fatalf("msb on PATH: got %q, %v; want %q", got, err, msb)
	}
}
