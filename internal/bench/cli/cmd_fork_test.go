package cli

import (
	"errors"
	"slices"
	"testing"
)

// TestParseSizes: msb bench fork --sizes takes B, KiB, MiB and GiB and
// refuses what is not a whole non-negative number of them as a usage error.
func TestParseSizes(t *testing.T) {
	got, err := parseSizes([]string{"8MiB", "1GiB", "512KiB", "4096B", "7"})
	if want := []int64{8 << 20, 1 << 30, 512 << 10, 4096, 7}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "MiB", "1.5GiB", "-1MiB", "8 MiB", "8mb", "0x10"} {
		if _, err := parseSizes([]string{bad}); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", bad, err)
		}
	}
}
