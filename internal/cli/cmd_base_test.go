package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// needDebianMirror skips t (fails it when strict) without mmdebstrap or
// without a reachable deb.debian.org.
func needDebianMirror(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		privtest.Skip(t, "mmdebstrap is not installed (.ci/deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "http://deb.debian.org/debian/dists/bookworm/Release", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		privtest.Skip(t, "deb.debian.org is unreachable: %v", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		privtest.Skip(t, "deb.debian.org answers %s", resp.Status)
	}
}

// TestDebianBase builds a small Debian base with mmdebstrap (the essential
// variant and hello), runs on it, finds it again for the same inputs and
// checks that a base with one more package (figlet) adds about that
// package's bytes to the cache. TestDebianBaseRootless reruns it as an
// unprivileged user (mmdebstrap's unshare mode).
func TestDebianBase(t *testing.T) {
	needDebianMirror(t)
	env := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache")}
	dir := t.TempDir()
	build := func(pkgs string, more ...string) engine.DebianBase {
		t.Helper()
		args := append([]string{"--json", "cache", "base", "build", "--suite", "bookworm", "--variant", "essential", "--packages", pkgs}, more...)
		r := msb(t, dir, env, args...)
		var b engine.DebianBase
		if err := json.Unmarshal([]byte(r.stdout), &b); r.code != 0 || err != nil {
			t.Fatalf("base build %s: exit %d, %v\n%s\n%s", pkgs, r.code, err, r.stdout, r.stderr)
		}
		return b
	}
	b1 := build("hello", "--name", "hi")
	if b1.Hit || b1.Ref != "base/debian/bookworm/"+b1.Key || len(b1.Refs) != 2 || b1.Refs[1] != "base/debian/hi" {
		t.Fatalf("first build: %+v", b1)
	}
	for _, name := range []string{"debian/bookworm/" + b1.Key, "debian/hi"} {
		r := msb(t, dir, env, "run", "--base", name, "--", "sh", "-c", "cat /etc/debian_version; hello; test -e /usr/bin/apt-get || echo no-apt")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "12.") || !strings.HasSuffix(r.stdout, "\nHello, world!\nno-apt\n") {
			t.Fatalf("run --base %s: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
	}
	testDebianDate(t, dir, env, b1, build)
	// The same inputs, packages spelled otherwise: a cache hit.
	if b := build(" hello,hello"); !b.Hit || b.Key != b1.Key || b.Layer != b1.Layer {
		t.Fatalf("second build of the same inputs: %+v, want a hit on %+v", b, b1)
	}

	du := func() api.CacheUsage {
		t.Helper()
		var u api.CacheUsage
		r := msb(t, dir, env, "--json", "cache", "du")
		if err := json.Unmarshal([]byte(r.stdout), &u); r.code != 0 || err != nil {
			t.Fatalf("cache du: %d %v %s", r.code, err, r.stderr)
		}
		return u
	}
	before := du()
	b2 := build("hello,figlet")
	added := du().TreeBytes - before.TreeBytes
	r := msb(t, dir, env, "run", "--base", "debian/bookworm/"+b2.Key, "--", "dpkg-query", "-W", "-f", "${Installed-Size}", "figlet")
	kib, err := strconv.ParseInt(r.stdout, 10, 64)
	if r.code != 0 || err != nil {
		t.Fatalf("figlet's size: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// figlet's files, and dpkg's status files (status, status-old) that
	// list one more package.
	limit := kib*1024*11/10 + 256<<10
	t.Logf("base with figlet: key %s, %d bytes added to the cache's files; figlet installs %d KiB", b2.Key, added, kib)
	if b2.Key == b1.Key || added > limit || added < kib*1024/2 || b2.UniqueBytes > limit {
		t.Fatalf("base with figlet added %d bytes (unique %d), want figlet's %d KiB + at most 256 KiB", added, b2.UniqueBytes, kib)
	}

	var ls []engine.DebianBase
	r = msb(t, dir, env, "--json", "cache", "base", "ls")
	if err := json.Unmarshal([]byte(r.stdout), &ls); r.code != 0 || err != nil || len(ls) != 3 { // hello, hello at a date, hello and figlet
		t.Fatalf("base ls: %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	for _, b := range ls {
		if b.Key == b2.Key && (strings.Join(b.Spec.Packages, ",") != "figlet,hello" || b.UniqueBytes != b2.UniqueBytes) {
			t.Errorf("base ls: %+v, want %+v", b, b2)
		}
	}
	for _, args := range [][]string{
		{"cache", "base", "build", "--suite", "Bookworm"},
		{"cache", "base", "build", "--suite", "bookworm", "--date", "2024-01-01"},
		{"cache", "base", "build", "--suite", "bookworm", "--mirror", "http://127.0.0.1:1/debian"},
		{"cache", "base", "build", "--suite", "bookworm", "--date", "20240101T000000Z", "--mirror", "http://127.0.0.1:1/archive"},
		{"run", "--base", "debian/nosuch", "--", "true"},
	} {
		r := msb(t, dir, env, args...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "msb: ") {
			t.Errorf("msb %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := msb(t, dir, env, "cache", "verify"); r.code != 0 {
		t.Fatalf("cache verify: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// testDebianDate builds the base of b1's packages at a date from a mirror
// laid out as snapshot.debian.org is (<mirror>/<date>/dists/...), which
// snapshot.debian.org itself cannot be from here: a server on loopback
// passes <date>/<path> to deb.debian.org's <path> and refuses any path
// outside that date. The build reads only the date's tree, gets a key of
// its own, and runs.
func testDebianDate(t *testing.T, dir string, env []string, b1 engine.DebianBase, build func(string, ...string) engine.DebianBase) {
	t.Helper()
	const date = "20261201T000000Z"
	var mu sync.Mutex
	served, refused := 0, []string{}
	upstream, _ := url.Parse("http://deb.debian.org/debian/")
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/archive/debian/"+date+"/")
		mu.Lock()
		if ok {
			served++
		} else {
			refused = append(refused, r.URL.Path)
		}
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path, r.Host = "/"+rest, upstream.Host // the proxy puts upstream's /debian/ before it
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	b := build("hello", "--date", date, "--mirror", srv.URL+"/archive/debian")
	mu.Lock()
	defer mu.Unlock()
	if b.Hit || b.Key == b1.Key || b.Spec.Date != date || served < 3 || len(refused) > 0 {
		t.Fatalf("base at %s: %+v, %d requests served under the date, refused %v; want a new key read from the date's tree alone", date, b, served, refused)
	}
	if r := msb(t, dir, env, "run", "--base", "debian/bookworm/"+b.Key, "--", "hello"); r.code != 0 || r.stdout != "Hello, world!\n" {
		t.Fatalf("run on the dated base: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestDebianBaseRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestDebianBase$")
}
