package privtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const helperEnv = "MSB_PRIVTEST_HELPER"

// TestHelperSkip is run by TestSkipFailsWhenStrict in a child process.
func TestHelperSkip(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestSkipFailsWhenStrict")
	}
	Skip(t, "no such feature on this host")
}

// TestSkipFailsWhenStrict: under MSB_TEST_STRICT=1 (make test) a skip for
// a missing feature is a failure; otherwise it is a skip.
func TestSkipFailsWhenStrict(t *testing.T) {
	for _, tc := range []struct {
		strict   string
		wantFail bool
	}{{"1", true}, {"", false}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSkip$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=1", StrictEnv+"="+tc.strict)
		out, err := cmd.CombinedOutput()
		failed := err != nil
		if failed != tc.wantFail || !strings.Contains(string(out), "no such feature") {
			t.Errorf("%s=%q: failed %v, want %v:\n%s", StrictEnv, tc.strict, failed, tc.wantFail, out)
		}
		if !tc.wantFail && !strings.Contains(string(out), "--- SKIP") {
			t.Errorf("not strict: want a skip:\n%s", out)
		}
	}
}
