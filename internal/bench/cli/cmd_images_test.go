package cli

import (
	"errors"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/bench"
)

// TestParseFileLayers: msb bench images --a-files and --b-files take
// COUNTxSIZE layers of generated files and refuse anything else as a
// usage error; none keeps the default layers (nil).
func TestParseFileLayers(t *testing.T) {
	got, err := parseFileLayers("a-files", []string{"30x4KiB", "3x300000B", "1x7"})
	want := []bench.ImageLayer{{Files: 30, FileSize: 4096}, {Files: 3, FileSize: 300000}, {Files: 1, FileSize: 7}}
	if err != nil || !slices.EqualFunc(got, want, func(a, b bench.ImageLayer) bool { return a.String() == b.String() }) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if got, err := parseFileLayers("b-files", nil); got != nil || err != nil {
		t.Errorf("no layers: got %v, %v; want nil", got, err)
	}
	for _, bad := range []string{"", "30", "x4KiB", "0x4KiB", "30x0B", "30x", "-1x4KiB", "30x4kb", "3.5x4KiB", "30X4KiB"} {
		if _, err := parseFileLayers("a-files", []string{bad}); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", bad, err)
		}
	}
}
