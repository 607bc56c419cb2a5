package sandbox

import (
	"strings"
	"testing"
)

// TestParseKernelVersion reads the major and minor version of kernel
// releases as uname gives them, and this host's; a rootless reset is
// refused on the ones before 6.15 alone.
func TestParseKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		rel   string
		want  [2]int
		reset bool // a rootless reset allowed
	}{
		{"6.18.44-fc-v1147", [2]int{6, 18}, true},
		{"6.14.0-37-generic", [2]int{6, 14}, false},
		{"5.15.0", [2]int{5, 15}, false},
		{"6.15-rc1", [2]int{6, 15}, true},
		{"7.0.1+", [2]int{7, 0}, true},
		{"4.19.325-cip114-rt1", [2]int{4, 19}, false},
		{"garbage", [2]int{0, 0}, false},
	} {
		got := parseKernelVersion(tc.rel)
		if got != tc.want {
			t.Errorf("parseKernelVersion(%q) = %v, want %v", tc.rel, got, tc.want)
		}
		if err := rootlessResetKernel(tc.rel, got); (err == nil) != tc.reset || err != nil && !strings.Contains(err.Error(), tc.rel) {
			t.Errorf("a rootless reset on kernel %s: %v, want allowed %v (an error naming the release)", tc.rel, err, tc.reset)
		}
	}
	if rel, v := kernel(); v[0] < 3 {
		t.Errorf("this host's kernel %q parsed as %v", rel, v)
	}
}
