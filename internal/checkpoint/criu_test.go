package checkpoint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

const criuHelperEnv = "MSB_CHECKPOINT_CRIU_HELPER"

// TestHelperCriuCheckFails is run by TestCriuCheckFailsStrict in a child
// process, with a criu on PATH whose check fails.
func TestHelperCriuCheckFails(t *testing.T) {
	if os.Getenv(criuHelperEnv) != "1" {
		t.Skip("run by TestCriuCheckFailsStrict")
	}
	testCriu(t)
	t.Error("testCriu returned with a criu whose check fails")
}

// TestCriuCheckFailsStrict: a criu 4.x whose "criu check" fails skips the
// CRIU tests, and fails them under MSB_TEST_STRICT=1 (make test; CI builds
// criu 4.1.1, whose check passes on its kernel), saying what the check said.
func TestCriuCheckFailsStrict(t *testing.T) {
	bin := t.TempDir()
	criu := "#!/bin/sh\ncase \"$1\" in\n--version) echo 'Version: 4.1.1';;\ncheck) echo 'Error (criu/cr-check.c:1): the test criu checks nothing' >&2; exit 1;;\nesac\n"
	if err := os.WriteFile(filepath.Join(bin, "criu"), []byte(criu), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strict   string
		wantFail bool
	}{{"1", true}, {"", false}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCriuCheckFails$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), criuHelperEnv+"=1", privtest.StrictEnv+"="+tc.strict,
			"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), "the test criu checks nothing") {
			t.Errorf("%s=%q: failed %v, want %v:\n%s", privtest.StrictEnv, tc.strict, failed, tc.wantFail, out)
		}
		if !tc.wantFail && !strings.Contains(string(out), "--- SKIP") {
			t.Errorf("not strict: want a skip:\n%s", out)
		}
	}
}
