package envcache

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// isNumberIntegrity is the integrity of is-number 7.0.0 (no dependencies)
// on registry.npmjs.org, as a lockfile names it.
const isNumberIntegrity = "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng=="

// registryProject is an install step that writes a small project using
// one npm package (a lockfile resolving it on registry.npmjs.org), one
// Go module and one crate (itoa; neither has dependencies), and fetches
// them: npm ci, go mod download and cargo fetch (no compiling: the test
// stays short; a writable module cache, which the rootless rerun's user
// can remove). Maven through the proxy in a build sandbox is
// task.TestLanguagesMore's (mvn is slow to start: half a minute more
// here); regproxy.TestMavenThroughProxy runs it on the host.
const registryProject = `cat > package.json <<'E'
{"name": "proj", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}
E
cat > package-lock.json <<'E'
{"name": "proj", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": {
  "": {"name": "proj", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}},
  "node_modules/is-number": {"version": "7.0.0", "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
    "integrity": "` + isNumberIntegrity + `", "engines": {"node": ">=0.12.0"}}}}
E
cat > go.mod <<'E'
module example.com/proj

go 1.21

require github.com/google/uuid v1.6.0
E
cat > go.sum <<'E'
github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=
github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=
E
npm ci --no-audit --no-fund
GOFLAGS=-modcacherw go mod download
mkdir -p rs/src
cat > rs/Cargo.toml <<'E'
[package]
name = "rs"
version = "0.1.0"
edition = "2021"

[dependencies]
itoa = "=1.0.11"
E
echo 'pub fn show(n: u8) -> String { itoa::Buffer::new().format(n).to_string() }' > rs/src/lib.rs
cargo fetch --manifest-path rs/Cargo.toml
`

// TestRegistryProxy builds a project's npm, Go and cargo dependencies
// with the build network through the registry proxy (npm replaces the
// lockfile's registry.npmjs.org with the proxy, cargo's config replaces
// crates.io; the proxy fetches from the real registries and keeps the
// packument, the tarball by its integrity, the module's files and the
// crate), then builds it again from an empty store with no network, from
// the download cache alone; both install layers run, cargo offline in
// them. An offline build of a module the cache lacks fails with the hint.
func TestRegistryProxy(t *testing.T) {
	reachable(t, "https://registry.npmjs.org/is-number")
	reachable(t, "https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.info")
	reachable(t, "https://index.crates.io/it/oa/itoa")
	rt := testRuntime(t)
	dl := filepath.Join(t.TempDir(), "downloads")
	search := ToolchainSearchFromEnv(os.Getenv)
	c := openCache(t, Options{Runtime: rt, Toolchains: search, BuildNetwork: true, DownloadCache: dl})
	inst := makeRepo(t, 1, 10, 1).instance(0)
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Language: spec.LangGo, Toolchains: []string{"go", "node", "rust"},
		Install: registryProject, TestCmd: "true", LogParser: "multiswe/gotest", Directives: spec.DirectivesNone}
	check := func(p *Prepared) {
		t.Helper()
		got := sh(t, sandboxOf(t, rt, p), `node -e 'console.log(require("is-number")(5))' && go mod verify`)
		if got != "true\nall modules verified" {
			t.Fatalf("in the sandbox: %q", got)
		}
		sh(t, sandboxOf(t, rt, p), "CARGO_TARGET_DIR=/tmp/target cargo build -q --manifest-path rs/Cargo.toml")
	}
	check(prepare(t, c, inst, sp))

	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(isNumberIntegrity, "sha512-"))
	for _, p := range []string{
		filepath.Join(dl, "npm/packuments/is-number.json"),
		regproxy.ContentPath(filepath.Join(dl, regproxy.NPMContentDir), "sha512", hex.EncodeToString(raw)),
		filepath.Join(dl, regproxy.GoDir, "github.com/google/uuid/@v/v1.6.0.zip"),
		filepath.Join(dl, regproxy.GoDir, "github.com/google/uuid/@v/v1.6.0.mod"),
		regproxy.CratePath(dl, "itoa", "1.0.11"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the registry proxy did not keep it: %v", err)
		}
	}

	offline := openCache(t, Options{Runtime: rt, Toolchains: search, DownloadCache: dl})
	check(prepare(t, offline, inst, sp))
	logs, _ := filepath.Glob(filepath.Join(offline.Dir(), "logs", KindInstall+"-*.log"))
	if len(logs) != 1 {
		t.Fatalf("offline install logs: %v", logs)
	}
	if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "# network: none;") {
		t.Fatalf("the offline rebuild had a network:\n%s", b)
	}

	missing := sp
	missing.Install = "GOFLAGS=-modcacherw go mod download github.com/google/uuid@v1.5.0"
	if _, err := offline.Prepare(context.Background(), inst, missing, nil); err == nil || !strings.Contains(err.Error(), ErrNotDownloaded.Error()) {
		t.Fatalf("offline build of a module the cache lacks: err = %v, want %q and the hint", err, ErrNotDownloaded)
	}
}

// TestRootlessRegistryProxy reruns TestRegistryProxy as an unprivileged
// user: the proxy runs in that user's msb, the build sandboxes rootless.
// The Rust toolchain is the caller's rustup sysroot, under root's home,
// which that user cannot read: the rerun gets a hard-linked copy of it
// through MSB_TOOLCHAIN_RUST, as a user would give one.
func TestRootlessRegistryProxy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestRegistryProxy covers the rootless mode")
	}
	out, err := exec.Command("rustc", "--print", "sysroot").Output()
	if err != nil {
		privtest.Skip(t, "no rustc on PATH: %v", err)
		return
	}
	dir, err := os.MkdirTemp("", "msb-rust-toolchain-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	rust := filepath.Join(dir, "rust")
	if out, err := exec.Command("cp", "-al", strings.TrimSpace(string(out)), rust).CombinedOutput(); err != nil {
		t.Fatalf("linking the rust toolchain: %v: %s", err, out)
	}
	privtest.UnprivilegedEnv(t, "^TestRegistryProxy$", ToolchainEnvVar("rust")+"="+rust)
}
