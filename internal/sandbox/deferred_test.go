package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestCreateDeferred: a sandbox whose layers come while its init starts
// (CreateDeferred, as a fork's children start while their parent's
// snapshot is taken) is built of them, and its Config names them. An
// error of later, or a layer that is not a directory, is Create's, and
// the init started meanwhile is gone with everything else (the runtime's
// cleanup checks its state dir and cgroups). A config with layers of its
// own is refused.
func TestCreateDeferred(t *testing.T) {
	rt := testRuntime(t)
	ctx := context.Background()
	layer := t.TempDir()
	os.Chmod(layer, 0o755)
	if err := os.WriteFile(filepath.Join(layer, "f"), []byte("from the layer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("layers later", func(t *testing.T) {
		sb, err := rt.CreateDeferred(ctx, Config{HostBase: true}, func(context.Context) (Deferred, error) {
			return Deferred{Layers: []string{layer}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close() })
		if out := mustOK(t, sb, "cat /f"); out != "from the layer\n" {
			t.Fatalf("/f: %q", out)
		}
		if got := sb.Config().Layers; !slices.Equal(got, []string{layer}) {
			t.Fatalf("Config().Layers = %q, want %q", got, layer)
		}
	})
	boom := errors.New("the snapshot failed")
	for _, tc := range []struct {
		name  string
		later func(context.Context) (Deferred, error)
		want  error
	}{
		{"later fails", func(context.Context) (Deferred, error) { return Deferred{}, boom }, boom},
		{"missing layer", func(context.Context) (Deferred, error) {
			return Deferred{Layers: []string{filepath.Join(layer, "missing")}}, nil
		}, ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := rt.CreateDeferred(ctx, Config{HostBase: true}, tc.later)
			if err == nil {
				sb.Close()
				t.Fatal("created")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("own layers", func(t *testing.T) {
		_, err := rt.CreateDeferred(ctx, Config{Layers: []string{layer}}, func(context.Context) (Deferred, error) {
			t.Error("later called")
			return Deferred{}, nil
		})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("got %v, want %v", err, ErrInvalidConfig)
		}
	})
}

// TestCreateDeferredRootless reruns TestCreateDeferred as an unprivileged
// user.
func TestCreateDeferredRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestCreateDeferred$")
}
