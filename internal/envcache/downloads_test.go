package envcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// upstreamIndex serves a PEP 503 index of the wheels in dir, as PyPI does
// (absolute file URLs with a sha256 fragment), and counts file downloads.
func upstreamIndex(t *testing.T, dir string) (*httptest.Server, *int) {
	t.Helper()
	downloads := new(int)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		ents, _ := os.ReadDir(dir)
		var b strings.Builder
		for _, e := range ents {
			if ProjectName(strings.SplitN(e.Name(), "-", 2)[0]) != r.PathValue("project") {
				continue
			}
			data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			sum := sha256.Sum256(data)
			fmt.Fprintf(&b, `<a href="%s/packages/%s#sha256=%s" data-requires-python="&gt;=3.6">%s</a>`, srv.URL, e.Name(), hex.EncodeToString(sum[:]), e.Name())
		}
		if b.Len() == 0 {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "<html><body>%s</body></html>", b.String())
	})
	mux.HandleFunc("/packages/{file}", func(w http.ResponseWriter, r *http.Request) {
		*downloads++
		http.ServeFile(w, r, filepath.Join(dir, r.PathValue("file")))
	})
	return srv, downloads
}

// TestDownloadCache: a build with the build network fetches through the
// proxy into the download cache; a build of the same environment in a new
// cache without network installs from the download cache alone, with the
// same key; a build needing what the cache lacks fails and says so.
func TestDownloadCache(t *testing.T) {
	srv, downloads := upstreamIndex(t, makeWheelhouse(t))
	repo := makeRepo(t, 2, 10, 1)
	rt := testRuntime(t)
	dl := filepath.Join(t.TempDir(), "downloads")
	sp := testSpec()
	sp.Install = ""
	online := openCache(t, Options{Runtime: rt, DownloadCache: dl, BuildNetwork: true, IndexURL: srv.URL + "/simple/"})
	p := prepare(t, online, repo.instance(0), sp)
	if *downloads != 1 {
		t.Fatalf("%d downloads from upstream", *downloads)
	}
	if _, err := os.Stat(filepath.Join(dl, "simple", "msbdemo", "index.html")); err != nil {
		t.Fatalf("no index page in the download cache: %v", err)
	}
	offline := openCache(t, Options{Runtime: rt, DownloadCache: dl})
	q := prepare(t, offline, repo.instance(0), sp)
	if q.EnvKey != p.EnvKey || offline.Stats().EnvBuilds != 1 || *downloads != 1 {
		t.Fatalf("offline rebuild: key %s vs %s, stats %+v, %d downloads", q.EnvKey, p.EnvKey, offline.Stats(), *downloads)
	}
	sb := sandboxOf(t, rt, q)
	if got := sh(t, sb, "python -c 'import msbdemo; print(msbdemo.ANSWER)'; pip download -q --no-deps -d /tmp/d msbdemo && ls /tmp/d"); got != "42\nmsbdemo-1.2.3-py3-none-any.whl" {
		t.Fatalf("task sandbox: %q", got)
	}
	sp.PipPackages = []string{"msbmissing"}
	_, err := openCache(t, Options{Runtime: rt, DownloadCache: dl}).Prepare(t.Context(), repo.instance(0), sp, nil)
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(be.Reason, ErrNotDownloaded.Error()) {
		t.Fatalf("offline build of a missing package: %v", err)
	}
}

// TestIndexDate: a page of the index as of a day lists only what was
// uploaded by then; PyPI's JSON page gives the upload times.
func TestIndexDate(t *testing.T) {
	body := []byte(`{"files":[
 {"filename":"a-1.0-py3-none-any.whl","url":"https://files.example/a-1.0-py3-none-any.whl","hashes":{"sha256":"` + strings.Repeat("1", 64) + `"},"requires-python":">=3.6","upload-time":"2024-01-02T03:04:05.000000Z","yanked":false},
 {"filename":"a-2.0-py3-none-any.whl","url":"/a-2.0-py3-none-any.whl","hashes":{"sha256":"` + strings.Repeat("2", 64) + `"},"upload-time":"2025-01-02T03:04:05.000000Z","yanked":"broken"}]}`)
	base, _ := url.Parse("https://index.example/simple/a/")
	r, err := parseJSONPage(body, base)
	if err != nil || len(r.Files) != 2 || r.Files[1].URL != "https://index.example/a-2.0-py3-none-any.whl" || r.Files[1].Yanked != "broken" {
		t.Fatalf("parsed %+v, %v", r, err)
	}
	dir := t.TempDir()
	for date, want := range map[string][]string{"2024-06-01": {"a-1.0"}, "2025-01-02": {"a-1.0", "a-2.0"}, "": {"a-1.0", "a-2.0"}} {
		if err := writePage(dir, "a", date, r); err != nil {
			t.Fatal(err)
		}
		page, _ := os.ReadFile(filepath.Join(dir, indexPath(date), "a", "index.html"))
		for _, v := range []string{"a-1.0", "a-2.0"} {
			if strings.Contains(string(page), v) != slices.Contains(want, v) {
				t.Errorf("index of %q: %s listed = %v\n%s", date, v, !slices.Contains(want, v), page)
			}
		}
	}
}
