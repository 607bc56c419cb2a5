package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/minisandbox/msb/internal/store"
)

// TestCachePullKilled: msb cache pull killed with SIGKILL while an object
// is half sent leaves a cache that verifies with no gc, and the next pull
// completes it. The server sends each object's first half and then holds
// the rest until the client goes away, so the kill lands mid-transfer.
func TestCachePullKilled(t *testing.T) {
	src, err := store.Open(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	base := commitFiles(t, src, "base", nil)
	env := commitFiles(t, src, "env", []store.LayerID{base})
	if err := src.SetRef(t.Context(), "env/pulled", env); err != nil {
		t.Fatal(err)
	}

	var throttle atomic.Bool
	throttle.Store(true)
	midway := make(chan struct{})
	var once sync.Once
	h := src.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !throttle.Load() || !strings.HasPrefix(r.URL.Path, "/v1/objects/") {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&halfWriter{ResponseWriter: w, held: r.Context().Done(), half: func() { once.Do(func() { close(midway) }) }}, r)
	}))
	defer srv.Close()

	cache := filepath.Join(t.TempDir(), "cache")
	env2 := []string{"MSB_CACHE=" + cache}
	pull := msbCmd(t, t.TempDir(), env2, "cache", "pull", srv.URL, "env/pulled")
	var out strings.Builder
	pull.Stdout, pull.Stderr = &out, &out
	if err := pull.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pull.Wait() }()
	select {
	case <-midway:
	case err := <-done:
		t.Fatalf("the pull ended (%v) before an object was half sent: %s", err, out.String())
	}
	if err := pull.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || pull.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the pull was not killed: %v", err)
	}
	if r := msb(t, t.TempDir(), env2, "cache", "verify"); r.code != 0 {
		t.Fatalf("verify after the killed pull: %+v", r)
	}

	throttle.Store(false)
	if r := msb(t, t.TempDir(), env2, "cache", "pull", srv.URL, "env/pulled"); r.code != 0 {
		t.Fatalf("the second pull: %+v", r)
	}
	if r := msb(t, t.TempDir(), env2, "cache", "verify"); r.code != 0 {
		t.Fatalf("verify after the second pull: %+v", r)
	}
	dst, err := store.Open(filepath.Join(cache, "store"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := dst.Ref("env/pulled"); err != nil || id != env || !dst.Has(env) || !dst.Has(base) {
		t.Fatalf("after the second pull: ref %s (%v), want %s with its parent", id, err, env)
	}
}

// commitFiles commits a layer of a few 256 KiB files named after name.
func commitFiles(t *testing.T, s *store.Store, name string, parents []store.LayerID) store.LayerID {
	t.Helper()
	dir := t.TempDir()
	for i := range 4 {
		b := []byte(strings.Repeat(fmt.Sprintf("%s %d\n", name, i), 256<<10/8))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d", name, i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id, err := s.CommitDir(t.Context(), dir, store.CommitOptions{Parents: parents})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// halfWriter passes through the first half of a body of known length,
// then holds the rest until held is closed (the client went away).
type halfWriter struct {
	http.ResponseWriter
	held    <-chan struct{}
	half    func() // called once the first half is out
	written int64
}

func (w *halfWriter) Write(b []byte) (int, error) {
	var size int64
	fmt.Sscan(w.Header().Get("Content-Length"), &size)
	if w.written+int64(len(b)) > size/2 {
		n, _ := w.ResponseWriter.Write(b[:size/2-w.written])
		w.written += int64(n)
		w.ResponseWriter.(http.Flusher).Flush()
		w.half()
		<-w.held
		return n, http.ErrAbortHandler
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	return n, err
}
