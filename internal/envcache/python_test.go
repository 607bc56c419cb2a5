package envcache

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPythonSearch: interpreters are found where the search says (its
// path, pyenv, uv under its home), pyenv shims are skipped, newest patch
// release first, and the zero value looks in no one's home.
func TestPythonSearch(t *testing.T) {
	home := t.TempDir()
	exe := func(parts ...string) string {
		p := filepath.Join(append([]string{home}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	onPath := exe("bin", "python3.97")
	shim := exe(".pyenv", "shims", "python3.97")
	old := exe(".pyenv", "versions", "3.97.2", "bin", "python3.97")
	newer := exe(".pyenv", "versions", "3.97.10", "bin", "python3.97")
	uv := exe(".local", "share", "uv", "python", "cpython-3.97.1-linux-x86_64-gnu", "bin", "python3.97")

	search := PythonSearch{Path: []string{filepath.Dir(shim), filepath.Dir(onPath)}, Home: home}
	got := search.candidates("3.97")
	if want := []string{onPath, newer, old, uv}; !slices.Equal(got, want) {
		t.Fatalf("candidates:\n got %q\nwant %q", got, want)
	}
	root := PythonSearch{PyenvRoot: filepath.Join(home, ".pyenv")}
	if got := root.candidates("3.97"); !slices.Equal(got, []string{newer, old}) {
		t.Fatalf("pyenv root alone: %q", got)
	}
	if got := (PythonSearch{}).candidates("3.97"); len(got) != 0 {
		t.Fatalf("the zero value searched a home: %q", got)
	}
}
