package regproxy

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
		"/npm/..%2f..%2fetc%2fpasswd": 404, "/npm/@scope%2f..": 404, "/go/example.com/../../etc/@v/list": 404, "/go/sumdb/sum.golang.org/supported": 404,
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
