package store

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// twoLayers makes a base and an env layer on it, with a ref on the env.
func twoLayers(t *testing.T, s *Store) (base, env LayerID) {
	t.Helper()
	base = commitNodes(t, s, map[string]node{"usr/lib/libx.so": {content: strings.Repeat("lib", 50000), mode: 0o755}, "etc/conf": {content: "a=1"}}, CommitOptions{})
	env = commitNodes(t, s, sampleTree(), CommitOptions{Parents: []LayerID{base}, Ref: "env/sample"})
	return base, env
}

func TestExportImport(t *testing.T) {
	src := newStore(t)
	base, env := twoLayers(t, src)
	var buf bytes.Buffer
	if err := src.Export(t.Context(), &buf, ExportOptions{Refs: []string{"env/sample"}}); err != nil {
		t.Fatal(err)
	}
	dst := newStore(t)
	rep, err := dst.Import(t.Context(), bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Layers) != 2 || rep.Layers[0] != base || rep.Layers[1] != env || len(rep.Refs) != 1 {
		t.Fatalf("import report %+v", rep)
	}
	if got, err := dst.Ref("env/sample"); err != nil || got != env {
		t.Fatalf("imported ref %s %v", got, err)
	}
	for _, id := range []LayerID{base, env} {
		diffViews(t, view(t, src.TreePath(id)), view(t, dst.TreePath(id)))
	}
	if r, err := dst.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
	// Importing again adds nothing.
	rep, err = dst.Import(t.Context(), bytes.NewReader(buf.Bytes()))
	if err != nil || rep.Objects != 0 {
		t.Fatalf("re-import: %+v %v", rep, err)
	}
}

// TestImportRejectsTampering: a tampered archive is refused and leaves a
// store that verifies.
func TestImportRejectsTampering(t *testing.T) {
	src := newStore(t)
	twoLayers(t, src)
	var buf bytes.Buffer
	if err := src.Export(t.Context(), &buf, ExportOptions{Refs: []string{"env/sample"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := zstdDecode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new string
		want           error
	}{
		{"object content", "print('a')", "print('b')", ErrDigestMismatch},
		{"manifest", `"mode":493`, `"mode":511`, ErrDigestMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(raw, []byte(tc.old)) {
				t.Fatalf("archive lacks %q", tc.old)
			}
			bad := bytes.Replace(raw, []byte(tc.old), []byte(tc.new), 1)
			dst := newStore(t)
			_, err := dst.Import(t.Context(), bytes.NewReader(zstdEncode(t, bad)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("import: %v, want %v", err, tc.want)
			}
			if refs, _ := dst.Refs(); len(refs) != 0 {
				t.Fatalf("failed import set refs %v", refs)
			}
			// Nothing of it names what is not there: no manifest whose
			// objects the import never stored.
			if r, err := dst.Verify(t.Context()); err != nil || !r.OK() {
				t.Fatalf("verify after the failed import: %v %v", err, r.Problems)
			}
		})
	}
	t.Run("garbage", func(t *testing.T) {
		_, err := newStore(t).Import(t.Context(), strings.NewReader("not zstd"))
		if !errors.Is(err, ErrBadArchive) {
			t.Fatalf("import: %v, want ErrBadArchive", err)
		}
	})
}

func zstdDecode(b []byte) ([]byte, error) {
	r, err := zstd.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func zstdEncode(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	w, _ := zstd.NewWriter(&out)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestPull(t *testing.T) {
	src := newStore(t)
	base, env := twoLayers(t, src)
	srv := httptest.NewServer(src.Handler())
	defer srv.Close()

	dst := newStore(t)
	// The puller already has the base: only the env's manifest and objects move.
	var exp bytes.Buffer
	if err := src.Export(t.Context(), &exp, ExportOptions{Layers: []LayerID{base}}); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Import(t.Context(), &exp); err != nil {
		t.Fatal(err)
	}
	rep, err := dst.Pull(t.Context(), srv.URL, env, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Layers) != 1 || rep.Layers[0] != env || rep.Objects == 0 {
		t.Fatalf("pull report %+v", rep)
	}
	diffViews(t, view(t, src.TreePath(env)), view(t, dst.TreePath(env)))
	if rep, err := dst.Pull(t.Context(), srv.URL, env, PullOptions{}); err != nil || len(rep.Layers) != 0 || rep.Objects != 0 {
		t.Fatalf("second pull fetched %+v (%v)", rep, err)
	}
	if r, err := dst.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}

	resp, err := http.Get(srv.URL + "/v1/refs/env/sample")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(b)) != env.String() {
		t.Fatalf("GET ref: %q", b)
	}
	for path, code := range map[string]int{
		"/v1/objects/sha256/" + strings.Repeat("0", 64):       404,
		"/v1/objects/sha256/xyz":                              400,
		"/v1/layers/" + strings.Repeat("a", 64) + "/manifest": 404,
		"/v1/refs/no/such":                                    404,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, code)
		}
	}
}

// TestPullRejectsCorruptServer: a server sending wrong bytes is caught.
func TestPullRejectsCorruptServer(t *testing.T) {
	src := newStore(t)
	_, env := twoLayers(t, src)
	h := src.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/objects/") {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if len(b) > 0 {
				b[len(b)/2] ^= 0x20
			}
			w.Write(b)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dst := newStore(t)
	_, err := dst.Pull(t.Context(), srv.URL, env, PullOptions{})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("pull from a corrupt server: %v, want ErrDigestMismatch", err)
	}
	if dst.Has(env) {
		t.Fatal("layer materialized from corrupt objects")
	}
	if n := countFiles(t, dst.path("objects")); n != 0 {
		t.Fatalf("%d objects kept from a failed pull batch", n)
	}
}
