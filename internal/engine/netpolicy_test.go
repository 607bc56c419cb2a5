package engine

import (
	"fmt"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestKindNoForwarder: a filtered sandbox on a host without its forwarder
// is unavailable (the host's lack, not the request's fault).
func TestKindNoForwarder(t *testing.T) {
	err := fmt.Errorf("creating sandbox x: %w", fmt.Errorf("%w: slirp4netns missing", sandbox.ErrNoForwarder))
	if k := Kind(err); k != api.CodeUnavailable {
		t.Fatalf("Kind = %s, want %s", k, api.CodeUnavailable)
	}
}
