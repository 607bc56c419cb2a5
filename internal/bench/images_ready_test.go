package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestMsbReady: the image row's msb task ready makes a sandbox whose
// session "main" the create opened, answers in it and closes it.
func TestMsbReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := engine.Open(ctx, engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	create, answer, err := msbReady(ctx, e, engine.SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	if create <= 0 || answer <= 0 {
		t.Errorf("create %v, answer %v", create, answer)
	}
	if sbs := e.Sandboxes(nil); len(sbs) > 0 {
		t.Errorf("sandboxes left: %v", sbs)
	}
}
