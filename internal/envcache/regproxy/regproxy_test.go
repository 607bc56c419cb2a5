package regproxy

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// upstream is a registry that serves one npm package, pkg 1.0.0 (and a
// scoped one, @s/pkg, with the same tarball), whose
// packument's integrity is integrity (the tarball's own, unless a test
// gives a wrong one), and one Go module version, example.com/m v1.0.0.
func upstream(t *testing.T, tarball []byte, integrity string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pkg":
			fmt.Fprintf(w, `{"name":"pkg","versions":{"1.0.0":{"name":"pkg","version":"1.0.0","dist":{"tarball":"%s/pkg/-/pkg-1.0.0.tgz","integrity":"%s"}}}}`, srv.URL, integrity)
		case "/@s/pkg": // a scoped package, asked for as /@s%2fpkg
			fmt.Fprintf(w, `{"name":"@s/pkg","versions":{"1.0.0":{"name":"@s/pkg","version":"1.0.0","dist":{"tarball":"%s/@s/pkg/-/pkg-1.0.0.tgz","integrity":"%s"}}}}`, srv.URL, integrity)
		case "/pkg/-/pkg-1.0.0.tgz", "/@s/pkg/-/pkg-1.0.0.tgz":
			w.Write(tarball)
		case "/example.com/m/@v/v1.0.0.mod":
			io.WriteString(w, "module example.com/m\n")
		case "/example.com/m/@v/list":
			io.WriteString(w, "v1.0.0\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sri(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func start(t *testing.T, p *Proxy) string {
	t.Helper()
	addr, stop, err := p.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "http://" + addr
}

// TestProxy: a packument (a scoped one too) is served with its tarball
// URLs on the proxy;
// a tarball is kept by its integrity and served from there when upstream
// is gone; a Go list is kept and serves when upstream cannot answer;
// what upstream lacks is a 404; paths out of the cache are refused.
func TestProxy(t *testing.T) {
	tarball := []byte("a tarball")
	up := upstream(t, tarball, sri(tarball))
	dir := t.TempDir()
	p := &Proxy{Dir: dir, NPM: up.URL, Go: up.URL}
	base := start(t, p)
	if code, body := get(t, base+"/npm/pkg"); code != 200 || !strings.Contains(body, `"tarball":"`+base+`/npm/pkg/-/pkg-1.0.0.tgz"`) {
		t.Fatalf("packument: %d %s", code, body)
	}
	if code, body := get(t, base+"/npm/pkg/-/pkg-1.0.0.tgz"); code != 200 || body != string(tarball) {
		t.Fatalf("tarball: %d %q", code, body)
	}
	if code, body := get(t, base+"/npm/@s%2fpkg"); code != 200 || !strings.Contains(body, `"tarball":"`+base+`/npm/@s/pkg/-/pkg-1.0.0.tgz"`) {
		t.Fatalf("scoped packument: %d %s", code, body)
	}
	if code, body := get(t, base+"/npm/@s/pkg/-/pkg-1.0.0.tgz"); code != 200 || body != string(tarball) {
		t.Fatalf("scoped tarball: %d %q", code, body)
	}
	sum := sha512.Sum512(tarball)
	if b, err := os.ReadFile(ContentPath(filepath.Join(dir, NPMContentDir), "sha512", hex.EncodeToString(sum[:]))); string(b) != string(tarball) {
		t.Fatalf("kept tarball: %q, %v", b, err)
	}
	if code, _ := get(t, base+"/go/example.com/m/@v/list"); code != 200 {
		t.Fatalf("go list: %d", code)
	}
	for path, want := range map[string]int{
		"/npm/nosuch": 404, "/go/example.com/m/@v/v9.0.0.mod": 404, "/go/example.com/m/@v/v1.0.0.mod": 200,
		"/npm/..%2f..%2fetc%2fpasswd": 404, "/npm/@scope%2f..": 404, "/go/example.com/../../etc/@v/list": 404, "/go/sumdb/sum.golang.org/supported": 404, "/go/sumdb/sum.golang.org/../../x": 404, "/go/sumdb/Sum/latest": 404, "/go/sumdb/sum.golang.org/other": 404,
	} {
		if code, body := get(t, base+path); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}

	up.Close() // upstream gone: what was kept serves
	for _, path := range []string{"/npm/pkg", "/npm/pkg/-/pkg-1.0.0.tgz", "/go/example.com/m/@v/list", "/go/example.com/m/@v/v1.0.0.mod"} {
		if code, body := get(t, base+path); code != 200 {
			t.Errorf("%s with upstream gone: %d %s", path, code, body)
		}
	}
}

// TestProxyBadTarball: a tarball that does not match the packument's
// integrity is refused and not kept.
func TestProxyBadTarball(t *testing.T) {
	up := upstream(t, []byte("tampered"), sri([]byte("original")))
	dir := t.TempDir()
	base := start(t, &Proxy{Dir: dir, NPM: up.URL, Go: up.URL})
	if code, body := get(t, base+"/npm/pkg/-/pkg-1.0.0.tgz"); code != http.StatusBadGateway || !strings.Contains(body, "sha512") {
		t.Fatalf("tampered tarball: %d %s", code, body)
	}
	sum := sha512.Sum512([]byte("original"))
	if _, err := os.Stat(ContentPath(filepath.Join(dir, NPMContentDir), "sha512", hex.EncodeToString(sum[:]))); !os.IsNotExist(err) {
		t.Fatalf("a tampered tarball was kept: %v", err)
	}
}

// cargoMavenUpstream is a sparse index with one crate, c 1.0.0 (whose
// index line's cksum is cksum; its downloads under /dl/ as the index's
// config.json says), and a Maven repository with one artifact, g:a:1
// (a jar whose .sha1 is sha1), and its metadata.
func cargoMavenUpstream(t *testing.T, crate []byte, cksum string, jar []byte, sha1 string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/index/config.json":
			fmt.Fprintf(w, `{"dl":"%s/dl/{crate}-{version}.crate","api":"%s/api"}`, srv.URL, srv.URL)
		case "/index/1/c":
			fmt.Fprintf(w, `{"name":"c","vers":"1.0.0","deps":[],"cksum":"%s","features":{},"yanked":false}`+"\n", cksum)
		case "/dl/c-1.0.0.crate":
			w.Write(crate)
		case "/maven2/g/a/1/a-1.jar":
			w.Write(jar)
		case "/maven2/g/a/1/a-1.jar.sha1":
			io.WriteString(w, sha1+"  a-1.jar\n")
		case "/maven2/g/a/maven-metadata.xml":
			io.WriteString(w, "<metadata><versioning><latest>1</latest></versioning></metadata>\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func sha1Hex(b []byte) string   { s := sha1.Sum(b); return hex.EncodeToString(s[:]) }

// TestProxyCargoMaven: the index's config.json sends downloads to the
// proxy; a crate is kept by its index's cksum and an artifact by its
// .sha1, and both serve when upstream is gone, as do the kept index file
// and metadata; paths out of the cache, a plain-HTTP request for another
// host, and what upstream lacks are refused.
func TestProxyCargoMaven(t *testing.T) {
	crate, jar := []byte("a crate"), []byte("a jar")
	up := cargoMavenUpstream(t, crate, sha256Hex(crate), jar, sha1Hex(jar))
	dir := t.TempDir()
	base := start(t, &Proxy{Dir: dir, Cargo: up.URL + "/index", Maven: up.URL + "/maven2"})
	if code, body := get(t, base+"/cargo/index/config.json"); code != 200 || body != `{"dl":"`+base+`/cargo/crates"}` {
		t.Fatalf("config.json: %d %s", code, body)
	}
	for path, want := range map[string]string{
		"/cargo/crates/c/1.0.0/download": string(crate),
		"/maven2/g/a/1/a-1.jar":          string(jar),
		"/maven2/g/a/maven-metadata.xml": "<metadata><versioning><latest>1</latest></versioning></metadata>\n",
		"/cargo/index/1/c":               "",
		"/maven2/g/a/1/a-1.jar.sha1":     sha1Hex(jar) + "  a-1.jar\n",
	} {
		if code, body := get(t, base+path); code != 200 || want != "" && body != want {
			t.Fatalf("%s: %d %q", path, code, body)
		}
	}
	if b, err := os.ReadFile(CratePath(dir, "c", "1.0.0")); string(b) != string(crate) {
		t.Fatalf("kept crate: %q, %v", b, err)
	}
	for path, want := range map[string]int{
		"/cargo/crates/c/9.0.0/download": 404, "/cargo/index/2/c": 404, "/cargo/index/1/..": 404, "/cargo/crates/../1.0.0/download": 404,
		"/maven2/g/a/2/a-2.jar": 404, "/maven2/../../etc/passwd": 404, "/maven2/g/..%2f..%2fx": 404,
	} {
		if code, body := get(t, base+path); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.com/npm/pkg", nil)
	proxied := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(mustURL(t, base))}}
	if resp, err := proxied.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("plain HTTP for another host through the proxy: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	up.Close() // upstream gone: what was kept serves
	for _, path := range []string{"/cargo/crates/c/1.0.0/download", "/cargo/index/1/c", "/maven2/g/a/1/a-1.jar", "/maven2/g/a/maven-metadata.xml"} {
		if code, body := get(t, base+path); code != 200 {
			t.Errorf("%s with upstream gone: %d %s", path, code, body)
		}
	}
}

// TestProxyCargoMavenTampered: a crate that is not its index's cksum and
// a jar that is not its .sha1 are refused and not kept.
func TestProxyCargoMavenTampered(t *testing.T) {
	up := cargoMavenUpstream(t, []byte("tampered"), sha256Hex([]byte("original")), []byte("tampered"), sha1Hex([]byte("original")))
	dir := t.TempDir()
	base := start(t, &Proxy{Dir: dir, Cargo: up.URL + "/index", Maven: up.URL + "/maven2"})
	for path, algo := range map[string]string{"/cargo/crates/c/1.0.0/download": "sha256", "/maven2/g/a/1/a-1.jar": "sha1"} {
		if code, body := get(t, base+path); code != http.StatusBadGateway || !strings.Contains(body, algo) {
			t.Errorf("tampered %s: %d %s", path, code, body)
		}
	}
	for _, p := range []string{CratePath(dir, "c", "1.0.0"), filepath.Join(dir, MavenDir, "g/a/1/a-1.jar")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a tampered file was kept: %v", err)
		}
	}
}

// TestProxyTunnel: a CONNECT through the proxy reaches its host (cargo's
// git dependencies over HTTPS when the proxy is its HTTP proxy).
func TestProxyTunnel(t *testing.T) {
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "through") }))
	defer tls.Close()
	base := start(t, &Proxy{Dir: t.TempDir()})
	client := tls.Client()
	client.Transport.(*http.Transport).Proxy = http.ProxyURL(mustURL(t, base))
	resp, err := client.Get(tls.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "through" {
		t.Fatalf("through the tunnel: %q", b)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// FuzzProxyPaths: whatever path a client asks for, the proxy keeps files
// under its dir only (its upstream answers every path; the dir is three
// levels down, so that a climb out of it lands where the test looks).
func FuzzProxyPaths(f *testing.F) {
	for _, s := range []string{"/cargo/index/1/a", "/cargo/index/../../x", "/cargo/crates/a/1.0.0/download", "/maven2/g/a/1/a-1.jar",
		"/maven2/../x/y", "/maven2/g/..%2f..%2fx/y", "/cargo/index/3/a/abc", "/cargo/crates/..%2f../1/download", "/npm/a/-/..%2f..%2fx", "/go/x/@v/..%2f..%2fy.zip"} {
		f.Add(s)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"dl":"http://`+r.Host+`/dl","name":"a","vers":"1.0.0","cksum":"00"}`)
	}))
	defer up.Close()
	f.Fuzz(func(t *testing.T, path string) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		root := t.TempDir()
		dir := filepath.Join(root, "a", "b", "dl")
		p := &Proxy{Dir: dir, NPM: up.URL, Go: up.URL, Cargo: up.URL, Maven: up.URL, Client: up.Client(), Log: slog.New(slog.DiscardHandler)}
		p.ServeHTTP(httptest.NewRecorder(), req)
		filepath.WalkDir(root, func(q string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasPrefix(q, dir+string(filepath.Separator)) {
				t.Errorf("%q wrote %s, outside the proxy's dir", path, q)
			}
			return nil
		})
	})
}
