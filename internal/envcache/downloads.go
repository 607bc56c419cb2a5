package envcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
)

// The download cache (docs/envcache.md): every distribution file pip
// fetched for a build, stored once by its SHA-256, with the index pages
// that listed them, laid out as a PEP 503 "simple" index that pip reads
// from disk:
//
//	<downloads>/simple/<project>/index.html   the page, links rewritten to files/
//	<downloads>/simple/<project>/origins.json sha256 -> upstream URL
//	<downloads>/files/<ab>/<sha256>/<filename>
//
// With the build network (Options.BuildNetwork) a build sandbox shares the
// host's network and pip's index is a proxy msb runs on 127.0.0.1 for that
// build: it serves pages and files from the cache and fetches (and keeps)
// what is missing from the upstream index. Without it (the default) a
// build has no network and pip's index is the cache itself, read-only:
// the same pages give the same resolution, so a build is repeatable
// offline from the cache. Task and evaluation sandboxes see the cache the
// same way (pip works offline there, e.g. the eval-time install).

// Paths and defaults.
const (
	downloadsMount = "/opt/msb/downloads"
	// DefaultIndexURL is the upstream index of the build network.
	DefaultIndexURL = "https://pypi.org/simple/"
)

// ErrNotDownloaded: a build without network needed a file or page that is
// not in the download cache.
var ErrNotDownloaded = errors.New("not in the download cache")

// DownloadsDir is the download cache directory.
func (c *Cache) DownloadsDir() string { return c.opts.DownloadCache }

// fileIndexEnv points pip at the download cache mounted read-only.
func fileIndexEnv() []string {
	return []string{"PIP_INDEX_URL=file://" + downloadsMount + "/simple/"}
}

// downloadsBind mounts the download cache read-only.
func (c *Cache) downloadsBind() sandbox.Bind {
	return sandbox.Bind{Source: c.opts.DownloadCache, Target: downloadsMount, ReadOnly: true}
}

// buildNet is how one build sandbox reaches packages.
type buildNet struct {
	network string
	env     []string
	binds   []sandbox.Bind
	stop    func()
	offline bool
}

// hint explains a failed build's pip error when the build had no network.
func (n buildNet) hint(output string) string {
	if n.offline && (strings.Contains(output, "No matching distribution") || strings.Contains(output, "Could not find a version")) {
		return fmt.Sprintf(" (%v: build with the build network on, msb cache build --build-network, to fetch it)", ErrNotDownloaded)
	}
	return ""
}

// buildNetwork says how the next build reaches packages: a wheelhouse
// (offline, it alone), the proxy (build network on), or the download cache
// read-only (offline).
func (c *Cache) buildNetwork(ctx context.Context) (buildNet, error) {
	if c.opts.Wheelhouse != "" {
		wh, err := filepath.Abs(c.opts.Wheelhouse)
		if err != nil {
			return buildNet{}, err
		}
		return buildNet{network: sandbox.NetworkNone, stop: func() {}, offline: true,
			binds: []sandbox.Bind{{Source: wh, Target: wheelMount, ReadOnly: true}},
			env:   []string{"PIP_NO_INDEX=1", "PIP_FIND_LINKS=" + wheelMount}}, nil
	}
	if !c.opts.BuildNetwork {
		return buildNet{network: sandbox.NetworkNone, stop: func() {}, offline: true,
			binds: []sandbox.Bind{c.downloadsBind()}, env: fileIndexEnv()}, nil
	}
	p := &indexProxy{dir: c.opts.DownloadCache, upstream: c.opts.IndexURL, log: c.log, client: &http.Client{Timeout: 30 * time.Minute}}
	addr, stop, err := p.start()
	if err != nil {
		return buildNet{}, err
	}
	return buildNet{network: sandbox.NetworkHost, stop: stop,
		env: []string{"PIP_INDEX_URL=http://" + addr + "/simple/", "PIP_TRUSTED_HOST=127.0.0.1"}}, nil
}

// indexProxy serves the download cache over HTTP and fills it from the
// upstream index.
type indexProxy struct {
	dir      string
	upstream string
	client   *http.Client
	log      *slog.Logger

	mu      sync.Mutex // guards origins and busy
	origins map[string]string
	busy    map[string]*sync.Mutex // per page or file being fetched
}

func (p *indexProxy) start() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("download cache proxy: %w", err)
	}
	p.origins, p.busy = map[string]string{}, map[string]*sync.Mutex{}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// ProjectName is a project's normalized name (PEP 503).
func ProjectName(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

func (p *indexProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "simple":
		p.servePage(w, req, ProjectName(parts[1]))
	case len(parts) == 4 && parts[0] == "files" && validName(parts[2]) && validName(parts[3]):
		p.serveFile(w, req, parts[2], parts[3])
	default:
		http.NotFound(w, req)
	}
}

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// lockFor serializes fetches of one page or file.
func (p *indexProxy) lockFor(name string) func() {
	p.mu.Lock()
	m := p.busy[name]
	if m == nil {
		m = &sync.Mutex{}
		p.busy[name] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (p *indexProxy) servePage(w http.ResponseWriter, req *http.Request, project string) {
	defer p.lockFor("page/" + project)()
	dir := filepath.Join(p.dir, "simple", project)
	page := filepath.Join(dir, "index.html")
	if _, err := os.Stat(page); err != nil {
		if err := p.fetchPage(req.Context(), project, dir); err != nil {
			p.log.Warn("download cache: index page", "project", project, "err", err)
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
	}
	if err := p.loadOrigins(dir); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	http.ServeFile(w, req, page)
}

func (p *indexProxy) loadOrigins(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "origins.json"))
	if err != nil {
		return err
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range m {
		p.origins[k] = v
	}
	return nil
}

var (
	anchorRE = regexp.MustCompile(`(?is)<a\s([^>]*)>`)
	attrRE   = regexp.MustCompile(`(?s)([a-zA-Z_:-]+)\s*=\s*"([^"]*)"`)
)

// fetchPage gets a project's page from upstream and writes it into the
// cache with every link pointing at files/, keeping the attributes pip
// selects by (data-requires-python, data-yanked).
func (p *indexProxy) fetchPage(ctx context.Context, project, dir string) error {
	pageURL := strings.TrimSuffix(p.upstream, "/") + "/" + project + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/html")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", pageURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	base, _ := url.Parse(pageURL)
	origins := map[string]string{}
	var out strings.Builder
	fmt.Fprintf(&out, "<!DOCTYPE html>\n<html><body>\n")
	for _, m := range anchorRE.FindAllStringSubmatch(string(body), -1) {
		attrs := map[string]string{}
		for _, a := range attrRE.FindAllStringSubmatch(m[1], -1) {
			attrs[strings.ToLower(a[1])] = html.UnescapeString(a[2])
		}
		u, err := base.Parse(attrs["href"])
		if err != nil {
			continue
		}
		sum, ok := strings.CutPrefix(u.Fragment, "sha256=")
		name := filepath.Base(u.Path)
		if n, err := url.PathUnescape(name); err == nil {
			name = n
		}
		if !ok || len(sum) != 64 || !validName(name) {
			continue
		}
		u.Fragment = ""
		origins[sum] = u.String()
		extra := ""
		for _, k := range []string{"data-requires-python", "data-yanked"} {
			if v, ok := attrs[k]; ok {
				extra += fmt.Sprintf(" %s=\"%s\"", k, html.EscapeString(v))
			}
		}
		fmt.Fprintf(&out, "<a href=\"../../files/%s/%s/%s#sha256=%s\"%s>%s</a><br/>\n",
			sum[:2], sum, url.PathEscape(name), sum, extra, html.EscapeString(name))
	}
	out.WriteString("</body></html>\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ob, _ := json.MarshalIndent(origins, "", " ")
	if err := writeAtomic(filepath.Join(dir, "origins.json"), ob); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "index.html"), []byte(out.String()))
}

func (p *indexProxy) serveFile(w http.ResponseWriter, req *http.Request, sum, name string) {
	path := filepath.Join(p.dir, "files", sum[:min(2, len(sum))], sum, name)
	if _, err := os.Stat(path); err != nil {
		unlock := p.lockFor("file/" + sum)
		_, err = os.Stat(path)
		if err != nil {
			err = p.fetchFile(req.Context(), sum, path)
		}
		unlock()
		if err != nil {
			p.log.Warn("download cache: file", "file", name, "err", err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	http.ServeFile(w, req, path)
}

// fetchFile downloads a file the cache's pages list, checks its SHA-256
// and renames it into place.
func (p *indexProxy) fetchFile(ctx context.Context, sum, path string) error {
	p.mu.Lock()
	src := p.origins[sum]
	p.mu.Unlock()
	if src == "" {
		return fmt.Errorf("file %s: %w (no index page lists it)", sum, ErrNotDownloaded)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", src, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("downloading %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("downloading %s: sha256 %s, the index says %s", src, got, sum)
	}
	os.Chmod(tmp.Name(), 0o644)
	return os.Rename(tmp.Name(), path)
}
