package task

import (
	"context"
	"os"
	"strings"
	"testing"

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
