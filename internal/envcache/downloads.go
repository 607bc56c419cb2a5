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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/sandbox"
)

// The download cache (docs/envcache.md): every distribution file pip
// fetched for a build, stored once by its SHA-256, with the index pages
// that listed them, laid out as a PEP 503 "simple" index that pip reads
// from disk:
//
//	<downloads>/projects/<project>.json            the page as fetched: files, URLs, upload times
//	<downloads>/simple/<project>/index.html        the page, links rewritten to files/
//	<downloads>/simple-<date>/<project>/index.html the files uploaded by that date only
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

// indexPath is the index of a cutoff date: "simple" for none, else
// "simple-<date>", whose pages list only files uploaded by the end of that
// day (the index as it was, so unpinned requirements resolve as they did).
func indexPath(date string) string {
	if date == "" {
		return "simple"
	}
	return "simple-" + date
}

// fileIndexEnv points pip at the download cache mounted read-only.
func fileIndexEnv(date string) []string {
	return []string{"PIP_INDEX_URL=file://" + downloadsMount + "/" + indexPath(date) + "/"}
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

// offlineMisses are what pip, npm, go, cargo and Maven print when an
// offline build needs what the download cache lacks.
var offlineMisses = []string{
	"No matching distribution", "Could not find a version", // pip
	"ENOTCACHED",                            // npm
	"module lookup disabled by GOPROXY=off", // go
	"you're using offline mode",             // cargo
	"in offline mode",                       // Maven
}

// hint explains a failed build's error when the build had no network and
// a tool missed something offline.
func (n buildNet) hint(output string) string {
	if n.offline && slices.ContainsFunc(offlineMisses, func(m string) bool { return strings.Contains(output, m) }) {
		return fmt.Sprintf(" (%v: build with the build network on, msb cache build --build-network, to fetch it)", ErrNotDownloaded)
	}
	return ""
}

// buildNetwork says how the next build reaches packages: a wheelhouse
// (offline, it alone), the proxy (build network on), or the download cache
// read-only (offline), with the index as of date ("" for today's).
func (c *Cache) buildNetwork(ctx context.Context, date string) (buildNet, error) {
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
		if err := writeDatePages(c.opts.DownloadCache, date); err != nil {
			return buildNet{}, err
		}
		return buildNet{network: sandbox.NetworkNone, stop: func() {}, offline: true,
			binds: []sandbox.Bind{c.downloadsBind()}, env: fileIndexEnv(date)}, nil
	}
	p := &indexProxy{dir: c.opts.DownloadCache, upstream: c.opts.IndexURL, log: c.log, client: &http.Client{Timeout: 30 * time.Minute}}
	addr, stop, err := p.start()
	if err != nil {
		return buildNet{}, err
	}
	return buildNet{network: sandbox.NetworkHost, stop: stop,
		env: []string{"PIP_INDEX_URL=http://" + addr + "/" + indexPath(date) + "/", "PIP_TRUSTED_HOST=127.0.0.1"}}, nil
}

// projectFile is one distribution file of a project's recorded page.
type projectFile struct {
	Filename       string `json:"filename"`
	URL            string `json:"url"`
	SHA256         string `json:"sha256"`
	RequiresPython string `json:"requires_python,omitempty"`
	Yanked         string `json:"yanked,omitempty"` // "" not yanked; the reason, or "yes"
	UploadTime     string `json:"upload_time,omitempty"`
}

// projectRecord is a project's page as fetched from upstream, once.
type projectRecord struct {
	Files []projectFile `json:"files"`
}

func recordPath(dir, project string) string {
	return filepath.Join(dir, "projects", project+".json")
}

func readRecord(dir, project string) (*projectRecord, error) {
	b, err := os.ReadFile(recordPath(dir, project))
	if err != nil {
		return nil, err
	}
	var r projectRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", recordPath(dir, project), err)
	}
	return &r, nil
}

// writePage writes a project's page of the index of date from its record.
func writePage(dir, project, date string, r *projectRecord) error {
	var out strings.Builder
	out.WriteString("<!DOCTYPE html>\n<html><body>\n")
	for _, f := range r.Files {
		if date != "" && f.UploadTime != "" && f.UploadTime[:min(len(f.UploadTime), 10)] > date {
			continue
		}
		extra := ""
		if f.RequiresPython != "" {
			extra += fmt.Sprintf(" data-requires-python=\"%s\"", html.EscapeString(f.RequiresPython))
		}
		if f.Yanked != "" {
			extra += fmt.Sprintf(" data-yanked=\"%s\"", html.EscapeString(f.Yanked))
		}
		fmt.Fprintf(&out, "<a href=\"../../files/%s/%s/%s#sha256=%s\"%s>%s</a><br/>\n",
			f.SHA256[:2], f.SHA256, url.PathEscape(f.Filename), f.SHA256, extra, html.EscapeString(f.Filename))
	}
	out.WriteString("</body></html>\n")
	pd := filepath.Join(dir, indexPath(date), project)
	if err := os.MkdirAll(pd, 0o755); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(pd, "index.html"), []byte(out.String()))
}

// writeDatePages makes sure every recorded project has a page in the
// index of date, for builds without network (they read pages from disk).
func writeDatePages(dir, date string) error {
	ents, err := os.ReadDir(filepath.Join(dir, "projects"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		project, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, indexPath(date), project, "index.html")); err == nil {
			continue
		}
		r, err := readRecord(dir, project)
		if err != nil {
			return err
		}
		if err := writePage(dir, project, date, r); err != nil {
			return err
		}
	}
	return nil
}

// indexProxy serves the download cache over HTTP and fills it from the
// upstream index.
type indexProxy struct {
	dir      string
	upstream string
	client   *http.Client
	log      *slog.Logger

	mu      sync.Mutex // guards origins
	origins map[string]string
	locks   regproxy.Locks // per page or file being fetched
}

func (p *indexProxy) start() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("download cache proxy: %w", err)
	}
	p.origins = map[string]string{}
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
	case len(parts) == 2 && (parts[0] == "simple" || dateIndexRE().MatchString(parts[0])):
		p.servePage(w, req, strings.TrimPrefix(strings.TrimPrefix(parts[0], "simple"), "-"), ProjectName(parts[1]))
	case len(parts) == 4 && parts[0] == "files" && validName(parts[2]) && validName(parts[3]):
		p.serveFile(w, req, parts[2], parts[3])
	default:
		http.NotFound(w, req)
	}
}

var dateIndexRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^simple-\d{4}-\d{2}-\d{2}$`) })

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// lockFor serializes fetches of one page or file.
func (p *indexProxy) lockFor(name string) func() { return p.locks.Lock(name) }

func (p *indexProxy) servePage(w http.ResponseWriter, req *http.Request, date, project string) {
	defer p.lockFor("page/" + project)()
	r, err := readRecord(p.dir, project)
	if err != nil {
		if r, err = p.fetchRecord(req.Context(), project); err != nil {
			p.log.Warn("download cache: index page", "project", project, "err", err)
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
	}
	page := filepath.Join(p.dir, indexPath(date), project, "index.html")
	if _, err := os.Stat(page); err != nil {
		if err := writePage(p.dir, project, date, r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	p.mu.Lock()
	for _, f := range r.Files {
		p.origins[f.SHA256] = f.URL
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html")
	http.ServeFile(w, req, page)
}

var (
	anchorRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<a\s([^>]*)>`) })
	attrRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)([a-zA-Z_:-]+)\s*=\s*"([^"]*)"`) })
)

// fetchRecord gets a project's page from upstream, in the JSON form of
// the simple API where the index has it (it gives upload times), else as
// HTML, and records it.
func (p *indexProxy) fetchRecord(ctx context.Context, project string) (*projectRecord, error) {
	pageURL := strings.TrimSuffix(p.upstream, "/") + "/" + project + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", pageURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	var r *projectRecord
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		r, err = parseJSONPage(body, resp.Request.URL)
	} else {
		r, err = parseHTMLPage(body, resp.Request.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pageURL, err)
	}
	if err := os.MkdirAll(filepath.Join(p.dir, "projects"), 0o755); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(r, "", " ")
	return r, writeAtomic(recordPath(p.dir, project), b)
}

func parseJSONPage(body []byte, base *url.URL) (*projectRecord, error) {
	var page struct {
		Files []struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython string            `json:"requires-python"`
			Yanked         any               `json:"yanked"`
			UploadTime     string            `json:"upload-time"`
		} `json:"files"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, err
	}
	r := &projectRecord{Files: []projectFile{}}
	for _, f := range page.Files {
		u, err := base.Parse(f.URL)
		sum := f.Hashes["sha256"]
		if err != nil || len(sum) != 64 || !validName(f.Filename) {
			continue
		}
		u.Fragment = ""
		pf := projectFile{Filename: f.Filename, URL: u.String(), SHA256: sum, RequiresPython: f.RequiresPython, UploadTime: f.UploadTime}
		switch y := f.Yanked.(type) {
		case string:
			pf.Yanked = cmpOr(y, "yes")
		case bool:
			if y {
				pf.Yanked = "yes"
			}
		}
		r.Files = append(r.Files, pf)
	}
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func parseHTMLPage(body []byte, base *url.URL) (*projectRecord, error) {
	r := &projectRecord{Files: []projectFile{}}
	for _, m := range anchorRE().FindAllStringSubmatch(string(body), -1) {
		attrs := map[string]string{}
		for _, a := range attrRE().FindAllStringSubmatch(m[1], -1) {
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
		pf := projectFile{Filename: name, URL: u.String(), SHA256: sum, RequiresPython: attrs["data-requires-python"]}
		if y, ok := attrs["data-yanked"]; ok {
			pf.Yanked = cmpOr(y, "yes")
		}
		r.Files = append(r.Files, pf)
	}
	return r, nil
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
	opts := cacheWrite
	opts.DirPerm, opts.TempPattern = 0o755, ".tmp-*"
	return atomicfile.WriteFrom(path, opts, func(f *os.File) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(f, h), resp.Body); err != nil {
			return fmt.Errorf("downloading %s: %w", src, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return fmt.Errorf("downloading %s: sha256 %s, the index says %s", src, got, sum)
		}
		return nil
	})
}
