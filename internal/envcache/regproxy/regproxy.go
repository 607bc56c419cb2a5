// Package regproxy is msb's caching proxy for the registries of the
// dependency steps of non-Python builds: npm's registry, the Go module
// proxy, crates.io (cargo's sparse index and its crates) and Maven
// Central. A build with the build network gets one Proxy on 127.0.0.1;
// the build's npm, go, cargo and mvn talk to it (Env, SetupScript), and
// it answers from the download cache, fetching from the upstream registry
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
//	go/sumdb/<name>/lookup/..., tile/...
//	                                the checksum database's answers, as the upstream proxy
//	                                serves them (sum.golang.org's through proxy.golang.org);
//	                                supported and latest the newest it gave
//	cargo/index/<prefix>/<name>     a crate's index file (the sparse index's layout:
//	                                1/a, 2/ab, 3/a/abc, ab/cd/abcd), the newest upstream gave
//	cargo/index/config.json         upstream's, for the URL its crates download from
//	cargo/<name>-<version>.crate    a crate (with cargo/index, a cargo local registry)
//	maven2/<group>/<artifact>/<version>/<file>
//	                                Maven Central's layout: artifacts, their .sha1, and
//	                                maven-metadata.xml (the newest upstream gave)
//
// A packument is served with its tarball URLs rewritten to the proxy; a
// tarball is checked against the packument's integrity, a crate against
// its index's cksum, a Maven artifact against upstream's .sha1, before it
// is kept. Versions, .mod, .zip, checksum database lookups and tiles,
// crates and Maven artifacts never change upstream, so they are served
// from the cache first; a list, @latest, the database's latest, a
// crate's index file or a maven-metadata.xml is asked upstream first and
// the kept one serves when upstream cannot answer.
//
// Upstream gets a deadline for connecting and its response header (the
// body then has the client's own timeout): a re-check of something kept
// RecheckWait (5 s), after which the kept copy serves and the proxy logs
// it, since an upstream that takes the connection and never answers
// would hold a build for the client's 30 minutes on every re-check; a
// fetch of what the cache lacks FetchWait (2 min), after which the
// request fails with a 502 that names the upstream. After a host gave no
// answer in time, its re-checks are not asked for SilentFor (1 min): the
// kept copies serve at once.
//
// cargo reaches the proxy as its HTTP proxy (CARGO_HTTP_PROXY) under a
// name of its own, CargoHost, which CargoConfig puts in place of
// crates.io; other hosts cargo asks for through it (a git dependency)
// are tunnelled as they are (CONNECT). mvn gets MavenSettings, a mirror
// of Central, through a wrapper of SetupScript's.
package regproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/atomicfile"
)

// Paths of the proxy's parts, for an offline build to read them from
// the download cache where it is mounted.
const (
	NPMContentDir = "npm/_cacache"
	GoDir         = "go"
	CargoDir      = "cargo"
	CargoIndexDir = "cargo/index"
	MavenDir      = "maven2"
)

// errNotFound: upstream has no such package, module or version (a 404 or
// 410), passed on as a 404 so that go tries the next proxy of its list.
var errNotFound = errors.New("not found upstream")

// errNoAnswer: upstream took no connection, or took it and sent no
// response header, within the request's deadline (RecheckWait, FetchWait).
var errNoAnswer = errors.New("no answer")

// The RecheckWait, FetchWait and SilentFor of a Proxy whose field is zero.
const (
	DefaultRecheckWait = 5 * time.Second
	DefaultFetchWait   = 2 * time.Minute
	DefaultSilentFor   = time.Minute
)

// Proxy serves the download cache's registry parts over HTTP and fills
// them from the upstream registries.
type Proxy struct {
	Dir    string // the download cache
	NPM    string // upstream npm registry, e.g. https://registry.npmjs.org
	Go     string // upstream Go module proxy, e.g. https://proxy.golang.org
	Cargo  string // upstream sparse index, e.g. https://index.crates.io
	Maven  string // upstream Maven repository, e.g. https://repo1.maven.org/maven2
	Client *http.Client
	Log    *slog.Logger

	// RecheckWait bounds a re-check of something the cache keeps (a Go
	// list or @latest, a crate's index file, Maven metadata): connecting
	// to upstream and its response header. Past it the kept copy serves.
	RecheckWait time.Duration
	// FetchWait bounds the same for a fetch of what the cache lacks,
	// which fails past it.
	FetchWait time.Duration
	// SilentFor is how long after an upstream host gave no answer in
	// time the re-checks for it are not asked (the kept copies serve at
	// once), so that a build re-checking many kept files waits
	// RecheckWait once, not once per file.
	SilentFor time.Duration

	locks Locks // per packument, tarball or module file being fetched

	mu     sync.Mutex
	silent map[string]time.Time // upstream host → when it last gave no answer in time
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

// Env points npm, go and cargo at the proxy listening on addr, and gives
// SetupScript the URL of its Maven mirror.
func Env(addr string) []string {
	return []string{"npm_config_registry=http://" + addr + "/npm/", "GOPROXY=http://" + addr + "/go",
		"CARGO_HTTP_PROXY=http://" + addr, "CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse",
		"MSB_MAVEN_MIRROR=http://" + addr + "/maven2/"}
}

// SetupScript is the shell a build with the proxy runs before its steps:
// CargoConfig into $CARGO_HOME (kept with the crates cargo fetches), and
// an mvn first on PATH that runs the real one with MavenSettings (under
// /tmp, which the build's layer drops: an offline mvn needs no mirror).
func SetupScript() string {
	return `if [ -n "${CARGO_HOME:-}" ]; then mkdir -p "$CARGO_HOME" && cat > "$CARGO_HOME/config.toml" <<'MSB_CARGO_CONFIG'
` + CargoConfig + `MSB_CARGO_CONFIG
fi
if msb_mvn=$(command -v mvn); then
  mkdir -p /tmp/msb-registry-proxy/bin
  cat > /tmp/msb-registry-proxy/settings.xml <<MSB_MAVEN_SETTINGS
` + MavenSettings("$MSB_MAVEN_MIRROR") + `MSB_MAVEN_SETTINGS
  printf '#!/bin/sh\nexec %s -s /tmp/msb-registry-proxy/settings.xml "$@"\n' "$msb_mvn" > /tmp/msb-registry-proxy/bin/mvn
  chmod +x /tmp/msb-registry-proxy/bin/mvn
  export PATH=/tmp/msb-registry-proxy/bin:$PATH
fi
`
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodConnect {
		p.tunnel(w, req)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	if h := req.URL.Host; h != "" && h != CargoHost { // (an absolute URL: the proxy as an HTTP proxy)
		http.Error(w, "msb's registry proxy serves "+CargoHost+" and tunnels (CONNECT) to other hosts; it does not forward plain HTTP to "+h, http.StatusForbidden)
		return
	}
	switch path := req.URL.Path; {
	case strings.HasPrefix(path, "/npm/"):
		p.serveNPM(w, req, strings.TrimPrefix(path, "/npm/"))
	case strings.HasPrefix(path, "/go/"):
		p.serveGo(w, req, strings.TrimPrefix(path, "/go/"))
	case strings.HasPrefix(path, "/cargo/"):
		p.serveCargo(w, req, strings.TrimPrefix(path, "/cargo/"))
	case strings.HasPrefix(path, "/maven2/"):
		p.serveMaven(w, req, strings.TrimPrefix(path, "/maven2/"))
	default:
		http.NotFound(w, req)
	}
}

// tunnel connects a CONNECT request to its host, as an HTTP proxy does:
// cargo, which has the proxy as its HTTP proxy, reaches other hosts (a
// git dependency) through it; nothing of the tunnel is kept.
func (p *Proxy) tunnel(w http.ResponseWriter, req *http.Request) {
	up, err := (&net.Dialer{Timeout: 30 * time.Second}).DialContext(req.Context(), "tcp", req.Host)
	if err != nil {
		p.fail(w, "tunnel to "+req.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	rw.Flush()
	go func() {
		io.Copy(up, rw.Reader) // (what the client sent after CONNECT, buffered, then the rest)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	io.Copy(conn, up)
	conn.Close()
	up.Close()
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

func isNotFound(err error) bool { return errors.Is(err, errNotFound) }

// recheckKey marks a request's context as a re-check (recheck).
type recheckKey struct{}

// recheck marks req as a re-check of something the cache keeps: what
// it asks upstream gets RecheckWait instead of FetchWait.
func recheck(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), recheckKey{}, true))
}

// wait is the deadline of req's upstream requests for connecting and
// the response header.
func (p *Proxy) wait(req *http.Request) time.Duration {
	if req.Context().Value(recheckKey{}) != nil {
		return cmp.Or(p.RecheckWait, DefaultRecheckWait)
	}
	return cmp.Or(p.FetchWait, DefaultFetchWait)
}

// servingKept logs that a re-check failed and the kept copy serves.
func (p *Proxy) servingKept(what string, err error) {
	if errors.Is(err, errNoAnswer) {
		p.Log.Warn("registry proxy: upstream did not answer the re-check, serving the kept copy", "what", what, "err", err)
		return
	}
	p.Log.Info("registry proxy: serving the kept answer", "what", what, "err", err)
}

// get GETs url with the given Accept header and returns the open
// response of a 200; a 404 or 410 is errNotFound, no response header
// within p.wait(req) errNoAnswer.
func (p *Proxy) get(req *http.Request, url, accept string) (*http.Response, error) {
	wait, host := p.wait(req), hostOf(url)
	if req.Context().Value(recheckKey{}) != nil {
		if at, ok := p.silentSince(host); ok {
			return nil, fmt.Errorf("%s: %w: upstream %s gave none in time at %s; its re-checks are not asked again until %s",
				url, errNoAnswer, host, at.UTC().Format(time.TimeOnly), at.Add(cmp.Or(p.SilentFor, DefaultSilentFor)).UTC().Format(time.TimeOnly))
		}
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(wait, func() { cancel(errNoAnswer) })
	up, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	if accept != "" {
		up.Header.Set("Accept", accept)
	}
	resp, err := p.Client.Do(up)
	if !timer.Stop() { // (it ran: cancel(errNoAnswer) ended the request)
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		p.setSilent(host, true)
		return nil, noAnswer(url, host, wait)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	p.setSilent(host, false)
	if resp.StatusCode == http.StatusOK {
		resp.Body = cancelOnClose{resp.Body, cancel}
		return resp, nil
	}
	resp.Body.Close()
	cancel(nil)
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return nil, fmt.Errorf("%s: %w (%s)", url, errNotFound, resp.Status)
	}
	return nil, fmt.Errorf("%s: %s", url, resp.Status)
}

// noAnswer is the error of a GET of url that got no response header
// within wait: it names the upstream and what to do.
func noAnswer(url, host string, wait time.Duration) error {
	return fmt.Errorf("%s: %w within %s (upstream %s took no connection, or took it and sent no response): "+
		"check that this host reaches %s, or give msb a mirror (npm_config_registry, GOPROXY in its environment); "+
		"a build without --build-network uses the download cache alone", url, errNoAnswer, wait, host, host)
}

// hostOf is url's host (and port), url itself when it has none.
func hostOf(url string) string {
	if u, err := neturl.Parse(url); err == nil && u.Host != "" {
		return u.Host
	}
	return url
}

// silentSince says when host last gave no answer in time, if that was
// within SilentFor.
func (p *Proxy) silentSince(host string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.silent[host]
	return at, ok && time.Since(at) < cmp.Or(p.SilentFor, DefaultSilentFor)
}

// setSilent records that host gave no answer in time (silent) or answered.
func (p *Proxy) setSilent(host string, silent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case silent && p.silent == nil:
		p.silent = map[string]time.Time{host: time.Now()}
	case silent:
		p.silent[host] = time.Now()
	default:
		delete(p.silent, host)
	}
}

// cancelOnClose ends a response's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// writeFrom copies r into path whole, after check (when set) accepts what
// was copied. The file is not synced: the proxy fetches it again if a crash
// of the machine loses it.
func writeFrom(path string, r io.Reader, check func() error) error {
	opts := atomicfile.Options{DirPerm: 0o755, TempPattern: ".tmp-*", NoSync: true}
	return atomicfile.WriteFrom(path, opts, func(f *os.File) error {
		if _, err := io.Copy(f, r); err != nil {
			return err
		}
		if check != nil {
			return check()
		}
		return nil
	})
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
