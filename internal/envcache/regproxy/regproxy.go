// Package regproxy is msb's caching proxy for the registries of the
// dependency steps of non-Python builds: npm's registry and the Go module
// proxy. A build with the build network gets one Proxy on 127.0.0.1; the
// build's npm and go talk to it (npm_config_registry, GOPROXY), and it
// answers from the download cache, fetching from the upstream registry
// only what the cache lacks, and keeping it. A build without the network
// reads the same files with no proxy at all: go from the cache as a
// file:// module proxy, npm from its own cache seeded with the stored
// tarballs (offline, npm ci takes a tarball by the lockfile's integrity).
//
// The nouns, under the download cache dir:
//
//	npm/packuments/<name>.json      a package's metadata as fetched (tarball URLs upstream's)
//	npm/_cacache/content-v2/<algo>/<ab>/<cd>/<rest>
//	                                a tarball, by its integrity, in the layout of npm's
//	                                cache (cacache), so npm's cache can be seeded from it
//	go/<module>/@v/<version>.info   Go's module proxy layout (the module path as the
//	go/<module>/@v/<version>.mod    go command escapes it), read by GOPROXY=file://
//	go/<module>/@v/<version>.zip
//	go/<module>/@v/list, @latest    the newest answer upstream gave
//
// A packument is served with its tarball URLs rewritten to the proxy; a
// tarball is checked against the packument's integrity before it is kept.
// Versions, .mod and .zip files never change upstream, so they are served
// from the cache first; a list or @latest is asked upstream first and the
// kept one serves when upstream cannot answer.
package regproxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Paths of the proxy's parts, for an offline build to read them from
// the download cache where it is mounted.
const (
	NPMContentDir = "npm/_cacache"
	GoDir         = "go"
)

// errNotFound: upstream has no such package, module or version (a 404 or
// 410), passed on as a 404 so that go tries the next proxy of its list.
var errNotFound = errors.New("not found upstream")

// Proxy serves the download cache's registry parts over HTTP and fills
// them from the upstream registries.
type Proxy struct {
	Dir    string // the download cache
	NPM    string // upstream npm registry, e.g. https://registry.npmjs.org
	Go     string // upstream Go module proxy, e.g. https://proxy.golang.org
	Client *http.Client
	Log    *slog.Logger

	locks Locks // per packument, tarball or module file being fetched
}

// Start listens on 127.0.0.1 and serves until stop is called; the
// environment of a build that uses it is Env(addr).
func (p *Proxy) Start() (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("registry proxy: %w", err)
	}
	if p.Client == nil {
		p.Client = &http.Client{Timeout: 30 * time.Minute}
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// Env points npm and go at the proxy listening on addr.
func Env(addr string) []string {
	return []string{"npm_config_registry=http://" + addr + "/npm/", "GOPROXY=http://" + addr + "/go"}
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	switch path := req.URL.Path; {
	case strings.HasPrefix(path, "/npm/"):
		p.serveNPM(w, req, strings.TrimPrefix(path, "/npm/"))
	case strings.HasPrefix(path, "/go/"):
		p.serveGo(w, req, strings.TrimPrefix(path, "/go/"))
	default:
		http.NotFound(w, req)
	}
}

// lockFor serializes fetches of one thing.
func (p *Proxy) lockFor(name string) func() { return p.locks.Lock(name) }

// Locks serializes work on one name at a time: the fetches of one file
// into a cache, so that concurrent builds asking for it fetch it once. The
// zero value is ready to use.
type Locks struct {
	mu   sync.Mutex
	busy map[string]*sync.Mutex
}

// Lock waits until name is free, takes it and returns its unlock.
func (l *Locks) Lock(name string) func() {
	l.mu.Lock()
	if l.busy == nil {
		l.busy = map[string]*sync.Mutex{}
	}
	m := l.busy[name]
	if m == nil {
		m = &sync.Mutex{}
		l.busy[name] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// fail answers a request that could not be served, 404 when upstream has
// no such thing, 502 otherwise, and logs it.
func (p *Proxy) fail(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, errNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	p.Log.Warn("registry proxy", "what", what, "err", err)
	http.Error(w, err.Error(), http.StatusBadGateway)
}

// get GETs url with the given Accept header and returns the open
// response of a 200; a 404 or 410 is errNotFound.
func (p *Proxy) get(req *http.Request, url, accept string) (*http.Response, error) {
	up, err := http.NewRequestWithContext(req.Context(), http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		up.Header.Set("Accept", accept)
	}
	resp, err := p.Client.Do(up)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return nil, fmt.Errorf("%s: %w (%s)", url, errNotFound, resp.Status)
	}
	return nil, fmt.Errorf("%s: %s", url, resp.Status)
}

// writeFrom copies r into path by a temporary file and a rename, after
// check (when set) accepts the temporary file.
func writeFrom(path string, r io.Reader, check func(tmp string) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if check != nil {
		if err := check(tmp.Name()); err != nil {
			return err
		}
	}
	os.Chmod(tmp.Name(), 0o644)
	return os.Rename(tmp.Name(), path)
}

// safePath says whether a request path names files under a dir: no empty,
// dot or dot-dot segment, no backslash or NUL.
func safePath(p string) bool {
	if p == "" || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}
