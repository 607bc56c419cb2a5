package envcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeepDeps: a build's fetched files under the kept parts go into the
// dependency store once (a file there is left alone); other parts of
// DepsDir (npm's cache, Go's module and build caches: the registry proxy
// keeps what npm and go fetch) do not.
func TestKeepDeps(t *testing.T) {
	upper, dl := t.TempDir(), t.TempDir()
	deps := filepath.Join(upper, "opt/msb/deps")
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(deps, "cargo/registry/cache/idx/itoa-1.0.11.crate"), "crate")
	write(filepath.Join(deps, "cargo/registry/cache/idx/ryu-1.0.18.crate"), "new")
	write(filepath.Join(deps, "go/pkg/mod/cache/download/x/@v/v1.zip"), "zip")
	write(filepath.Join(deps, "go/cache/ab/build"), "build cache")
	write(filepath.Join(deps, "npm/_cacache/index-v5/00/x"), "index")
	write(filepath.Join(dl, "deps/cargo/registry/cache/idx/ryu-1.0.18.crate"), "old")
	c := &Cache{opts: Options{DownloadCache: dl}}
	if err := c.keepDeps(upper); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"deps/cargo/registry/cache/idx/itoa-1.0.11.crate": "crate",
		"deps/cargo/registry/cache/idx/ryu-1.0.18.crate":  "old",
		"deps/go/pkg/mod/cache/download/x/@v/v1.zip":      "",
		"deps/go/cache/ab/build":                          "",
		"deps/npm/_cacache/index-v5/00/x":                 "",
	} {
		b, err := os.ReadFile(filepath.Join(dl, p))
		if string(b) != want || want == "" && !os.IsNotExist(err) {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if s := seedScript(); !strings.Contains(s, "cp -R "+downloadsMount+"/deps/cargo/registry/. "+DepsDir+"/cargo/registry/") {
		t.Errorf("seed script:\n%s", s)
	}
}
