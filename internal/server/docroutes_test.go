package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/store"
)

// A route mention is "METHOD /path" in prose or a string: {name} is a
// path parameter (named as the OpenAPI document names it), <name> a
// placeholder for a concrete value.
var mentionRe = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9_.{}<>$/-]*)`)

// mention is one route named somewhere, and where.
type mention struct{ method, path, where string }

// TestDocRoutes: every route the docs (docs/*.md, README.md) and the Go
// sources name is served, by the daemon (its native API, the SWE-ReX
// routes, /metrics) or by a cache's store server, and one of the native
// API is in docs/openapi.json with the same path parameters. The E2B front
// end's files (docs/e2b.md, internal/server/e2b) and its benchmark's
// (internal/bench/e2b.go, which serves a floor of E2B's routes) are not
// read: they name E2B's own API, served by a separate listener this test
// does not probe.
func TestDocRoutes(t *testing.T) {
	mentions := routeMentions(t)
	if len(mentions) < 20 {
		t.Fatalf("found %d route mentions: the scan is broken", len(mentions))
	}
	daemon := probeDaemon(t)
	storeMux := storeRoutes(t)
	doc := documentedRoutes(t)
	for _, m := range mentions {
		probe := concrete(m.path)
		switch {
		case daemon(m.method, probe):
			if strings.HasPrefix(m.path, "/v1/") && !doc.has(m.method, m.path) {
				t.Errorf("%s: %s %s is served but not in docs/openapi.json (or names its parameters otherwise)", m.where, m.method, m.path)
			}
		case storeMux(m.method, probe):
		default:
			t.Errorf("%s: %s %s is not a route msb serves", m.where, m.method, m.path)
		}
	}
}

// routeMentions are the routes named in the docs and in the non-test Go
// sources of the repository.
func routeMentions(t *testing.T) []mention {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "ls-files", "README.md", "docs/*.md", "*.go").Output()
	if err != nil {
		t.Fatalf("listing the sources: %v", err)
	}
	var ms []mention
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || f == "docs/e2b.md" || f == "internal/bench/e2b.go" ||
			strings.HasPrefix(f, "internal/server/e2b/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, sm := range mentionRe.FindAllStringSubmatch(line, -1) {
				p := strings.TrimRight(sm[2], ".:")
				ms = append(ms, mention{method: sm[1], path: p, where: f + ":" + strconv.Itoa(i+1)})
			}
		}
	}
	return ms
}

var paramRe = regexp.MustCompile(`\{[^}/]*\}|<[^>/]*>`)

// concrete is a mentioned path with a value for each parameter.
func concrete(p string) string { return paramRe.ReplaceAllString(p, "p1") }

// probeDaemon says whether a daemon serves method on path: answered by a
// real server (shutting down, so that no route does its work) with
// anything but 404 or 405. The SWE-ReX routes are served at the root too,
// as with --root-sandbox.
func probeDaemon(t *testing.T) func(method, path string) bool {
	t.Helper()
	privtest.RequireRoot(t)
	e, err := engine.Open(context.Background(), engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	s := New(e, Options{Token: testToken, RootSandbox: "root-sandbox"})
	s.closing.Store(true)
	return func(method, path string) bool {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		s.handler.ServeHTTP(w, r)
		return w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed
	}
}

// storeRoutes says whether a store server (msb cache serve) has a route
// for method on path.
func storeRoutes(t *testing.T) func(method, path string) bool {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mux, ok := st.Handler().(*http.ServeMux)
	if !ok {
		t.Fatal("the store's handler is no longer a ServeMux: probe it otherwise")
	}
	return func(method, path string) bool {
		_, pattern := mux.Handler(httptest.NewRequest(method, path, nil))
		return pattern != ""
	}
}

// openapiRoutes are the operations of docs/openapi.json by method and path.
type openapiRoutes map[string]map[string]bool

func documentedRoutes(t *testing.T) openapiRoutes {
	t.Helper()
	b, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	r := openapiRoutes{}
	for p, ops := range d.Paths {
		r[p] = map[string]bool{}
		for m := range ops {
			r[p][strings.ToUpper(m)] = true
		}
	}
	return r
}

// has says whether the document has method on path: a {name} of path is
// the document's parameter of that name, a concrete segment (or a <name>
// placeholder) any value of a parameter.
func (r openapiRoutes) has(method, path string) bool {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, tmpl := range keys {
		if r[tmpl][method] && pathMatches(tmpl, path) {
			return true
		}
	}
	return false
}

func pathMatches(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, ts := range ts {
		p := ps[i]
		switch {
		case ts == p:
		case strings.HasPrefix(ts, "{") && !strings.HasPrefix(p, "{") && p != "":
		default:
			return false
		}
	}
	return true
}
