package grading

import (
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/grading/integrity"
)

// TestChannelInnerRunIDs: pytest-dev__pytest-5262's gold patch was
// flagged by the channel. Its tests run pytest inside the run; the inner
// run's verbose line "PASSED   [100%]" (live logging puts the status on a
// line of its own) parses as a test "[100%]" that passed, and the dataset
// lists it in PASS_TO_PASS, but the run's own report never has it. Only
// ids of the test patch's files, or of files the report has tests of, are
// checked: the inner ids are not, a real test of the run still is.
func TestChannelInnerRunIDs(t *testing.T) {
	const (
		file   = "testing/logging/test_reporting.py"
		fixed  = file + "::test_live_logging_suspends_capture"
		kept   = file + "::test_nothing_logged"
		inner  = "[100%]"
		other  = "test_capsysbinary.py::test_hello" // pytest-dev__pytest-7521's inner id
		elsewh = "testing/test_capture.py::test_kept"
	)
	testPatch := "diff --git a/" + file + " b/" + file + "\n--- a/" + file + "\n+++ b/" + file + "\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
	// The log as the real run printed it: the inner run's lines, then the
	// outer run's -rA summary.
	log := "test_global_capture_with_live_logging.py::test_global \n" +
		"PASSED                                                                   [100%]\n" +
		"PASSED " + other + "\n" +
		"PASSED " + fixed + "\nPASSED " + kept + "\nPASSED " + elsewh + "\n"
	report := func(failed string, ids ...string) []byte {
		var b strings.Builder
		for _, id := range ids {
			outcome := "passed"
			if id == failed {
				outcome = "failed"
			}
			fmt.Fprintf(&b, `{"id": %q, "when": "call", "outcome": %q, "xfail": false}`+"\n", id, outcome)
		}
		return []byte(b.String())
	}
	logged := ParsePytest(log)
	e := Evaluation{Parse: ParsePytest, Channel: integrity.NewChannel("pytest -rA"), TestPatch: testPatch,
		Expected: Expected{FailToPass: []string{fixed}, PassToPass: []string{inner, other, kept, elsewh}}}
	for _, tc := range []struct {
		name   string
		report []byte
		want   string // a reason's part; "" for none
	}{
		{"honest", report("", fixed, kept, elsewh), ""},
		{"a test of the patch's file failed", report(kept, fixed, kept, elsewh), kept + " (failed)"},
		{"a test of the patch's file missing", report("", fixed, elsewh), kept + " (missing)"},
		{"a test of a file the report has, failed", report(elsewh, fixed, kept, elsewh), elsewh + " (failed)"},
		{"no report", nil, "which is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.ChannelReport = tc.report
			r := channelReasons(e, Verdict{Statuses: logged})
			if tc.want == "" && r != nil || tc.want != "" && (len(r) != 1 || !strings.Contains(r[0], tc.want)) {
				t.Fatalf("reasons %q, want one with %q", r, tc.want)
			}
			if len(r) == 1 && (strings.Contains(r[0], inner) || strings.Contains(r[0], other)) {
				t.Errorf("an inner run's id checked: %q", r)
			}
		})
	}
}
