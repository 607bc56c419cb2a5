package task

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// TestApplyPatchIntoGit: a model patch that also writes a hook into .git
// (git apply refuses the path; GNU patch, the last fallback, would write
// it, and the eval script's git checkout would run it in the grading
// sandbox, where it could rewrite what the tests see) is refused: the
// patch does not apply, no hook runs, and the detail says why.
func TestApplyPatchIntoGit(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	hook := "#!/bin/sh\ntouch /tmp/msb-ran-patchhook\n"
	p := tk.Instance.Patch + "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1,2 @@\n"
	for _, l := range strings.SplitAfter(strings.TrimSuffix(hook, "\n"), "\n") {
		p += "+" + l
	}
	p += "\n"
	ev := Evaluate(context.Background(), f.env, tk, api.Prediction{InstanceID: tk.ID(), Model: "agent", ModelPatch: &p}, opts())
	if ev.Result.Outcome != api.OutcomePatchApplyFailed || !strings.Contains(ev.Result.Detail, gitChanged) {
		t.Fatalf("a patch writing into .git: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.RunLog)
	}
	if _, err := os.Stat("/tmp/msb-ran-patchhook"); err == nil {
		t.Error("the patch's hook ran on the host")
	}
}

// TestDiffEachHostileSetting: each setting of hostileGit alone (one could
// hide another in TestDiffHostileGit) runs no program, in the sandbox or
// on the host, and the patch read from the sandbox resolves the instance.
func TestDiffEachHostileSetting(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	ctx := context.Background()
	for _, h := range hostileGit {
		t.Run(h.name, func(t *testing.T) {
			sb, err := Open(ctx, f.env, tk, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			agent := h.setup + ` && sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py`
			if res, err := sb.run(ctx, agent, time.Minute); err != nil || res.ExitCode != 0 {
				t.Fatalf("agent: %v %+v", err, res)
			}
			d, err := sb.Diff(ctx)
			if err != nil {
				t.Fatal(err)
			}
			marker := "/tmp/msb-ran-" + h.name
			if res, _ := sb.run(ctx, "test -e "+marker, time.Minute); res.ExitCode == 0 {
				t.Errorf("a program the repository names ran in the sandbox")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a program the repository names ran on the host")
			}
			ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: tk.ID(), Model: "agent", ModelPatch: &d}, opts())
			if ev.Result.Outcome != api.OutcomeResolved {
				t.Fatalf("the agent's patch: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, d)
			}
		})
	}
}
