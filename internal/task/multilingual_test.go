package task

import (
	"context"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
)

// ginLikeProject is a Go package laid out for gin's SWE-bench
// Multilingual entry at version 1805 (install `go test -c .`, test command
// `go test -v . -run "^Test.*Router"`, parser gotest): the test patch adds
// TestRouterAdd, which fails until the fix; TestRouterMul passes
// throughout; TestOther is outside the command's -run and never runs.
var ginLikeProject = langProject{
	name: "ginlike",
	base: map[string]string{
		"go.mod":    "module ginlike\n\ngo 1.22\n",
		"router.go": "package ginlike\n\nfunc Add(a, b int) int { return a - b }\n\nfunc Mul(a, b int) int { return a * b }\n",
		"router_test.go": "package ginlike\n\nimport \"testing\"\n\nfunc TestRouterMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(Mul(2, 3))\n\t}\n}\n\n" +
			"func TestOther(t *testing.T) { t.Fatal(\"not selected by -run\") }\n",
	},
	tests: map[string]string{"add_test.go": "package ginlike\n\nimport \"testing\"\n\nfunc TestRouterAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n"},
	fix:   map[string]string{"router.go": "package ginlike\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Mul(a, b int) int { return a * b }\n"},
	p2p:   []string{"TestRouterMul"}, f2p: []string{"TestRouterAdd"},
}

// TestMultilingualRow evaluates a SWE-bench-shaped row of gin-gonic/gin at
// version 1805 over a generated repository with no spec file: spec.Resolve
// gives it the built-in SWE-bench Multilingual entry (the harness's
// commands on the host's Go, the gotest parser), a task's sandbox has an
// empty diff after the install step, the gold patch resolves it, the
// empty patch does not, and Judge admits it.
func TestMultilingualRow(t *testing.T) {
	env := langEnv(t)
	in := ginLikeProject.row(t)
	in.Source, in.MultiSWE = dataset.SWEBench, nil
	in.Repo, in.Version, in.InstanceID = "gin-gonic/gin", "1805", "gin-gonic__gin-1805"
	tk, err := New(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Spec.LogParser != "gotest" || !strings.Contains(tk.Spec.TestCmd, `-run "^Test.*Router"`) {
		t.Fatalf("spec: parser %q, test_cmd %q: not the Multilingual entry", tk.Spec.LogParser, tk.Spec.TestCmd)
	}
	// the install step ran gin's `go test -c .`: an agent that changed
	// nothing has an empty patch, not the test binary
	sb, err := Open(context.Background(), env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sb.Diff(context.Background())
	sb.Close()
	if err != nil || d != "" {
		t.Fatalf("an untouched task's diff (%v): %.300q", err, d)
	}
	var results []api.EvalResult
	gradeGoldAndEmpty(t, env, tk, in, func(_ api.Outcome, ev Evaluation) {
		if strings.Contains(ev.Artifacts.TestOutput, "--- FAIL: TestOther") || !strings.Contains(ev.Artifacts.TestOutput, "TestRouterAdd") {
			t.Fatalf("the harness's -run did not select the tests:\n%s", ev.Artifacts.TestOutput)
		}
		results = append(results, ev.Result)
	})
	if v := Judge(results[0], results[1]); !v.Valid {
		t.Fatalf("Judge: not valid: %+v", v)
	}
}
