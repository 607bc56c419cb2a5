package task

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// hostileGit is what an agent can do to the repository's git before its
// patch is read: each setting would run a program (it touches a marker
// named after the setting), hide the change or move the repository.
var hostileGit = []struct{ name, setup string }{
	{"fsmonitor", `printf '#!/bin/sh\ntouch /tmp/msb-ran-fsmonitor\nexit 1\n' > .git/evil.sh && chmod +x .git/evil.sh && git config core.fsmonitor /testbed/.git/evil.sh`},
	{"hooks", `mkdir -p .git/evilhooks && for h in pre-commit post-index-change reference-transaction; do printf '#!/bin/sh\ntouch /tmp/msb-ran-hooks\n' > .git/evilhooks/$h; chmod +x .git/evilhooks/$h; done && git config core.hooksPath /testbed/.git/evilhooks`},
	{"filter", `echo '* filter=evil' >> .gitattributes && git config filter.evil.clean "sh -c 'touch /tmp/msb-ran-filter; echo HIDDEN'" && git config filter.evil.required true`},
	{"textconv", `echo '*.py diff=evil' >> .gitattributes && git config diff.evil.textconv "sh -c 'touch /tmp/msb-ran-textconv; echo fake'" && git config diff.evil.command "sh -c 'touch /tmp/msb-ran-textconv'"`},
	{"external", `git config diff.external "sh -c 'touch /tmp/msb-ran-external'"`},
	{"binary", `echo 'calc/*.py -diff' >> .gitattributes`},
	{"global", `mkdir -p $HOME && printf '[core]\n\tfsmonitor = /testbed/.git/evil2.sh\n[diff]\n\texternal = /testbed/.git/evil2.sh\n' > $HOME/.gitconfig && printf '#!/bin/sh\ntouch /tmp/msb-ran-global\nexit 1\n' > .git/evil2.sh && chmod +x .git/evil2.sh`},
	{"worktree", `mkdir -p /tmp/elsewhere && git config core.worktree /tmp/elsewhere`},
	{"alternates", `mkdir -p /tmp/alt && echo /tmp/alt >> .git/objects/info/alternates`},
}

// TestDiffHostileGit: with every hostile setting of hostileGit at once, no
// setting ran a program (in the sandbox or on the host), and the agent's
// patch is its change: it resolves the instance in a fresh sandbox.
func TestDiffHostileGit(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	ctx := context.Background()
	sb := f.open(t, tk)
	for _, h := range hostileGit {
		if res, err := sb.run(ctx, h.setup, time.Minute); err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", h.name, err, res)
		}
	}
	res, err := sb.run(ctx, `sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py`, time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("agent: %v %+v", err, res)
	}
	d, err := sb.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The "-diff" attribute makes stats.py's hunk a binary one: applicable,
	// and the evaluation below proves it holds the fix, not what a filter
	// or textconv made of it.
	if !strings.Contains(d, "diff --git a/calc/stats.py b/calc/stats.py") || strings.Contains(d, "Binary files") {
		t.Fatalf("the patch is not the agent's change:\n%s", d)
	}
	for _, h := range hostileGit {
		marker := "/tmp/msb-ran-" + h.name
		if res, _ := sb.run(ctx, "test -e "+marker, time.Minute); res.ExitCode == 0 {
			t.Errorf("%s: a program the repository names ran in the sandbox", h.name)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: a program the repository names ran on the host", h.name)
		}
	}
	ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: tk.ID(), Model: "agent", ModelPatch: &d}, opts())
	if ev.Result.Outcome != api.OutcomeResolved {
		t.Fatalf("the agent's patch: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
}

// TestDiffGitFileElsewhere: a .git file pointing at another repository is
// not followed (its diff would be another repository's): reading the patch
// fails with ErrDiff, naming git's complaint.
func TestDiffGitFileElsewhere(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	ctx := context.Background()
	sb := f.open(t, tk)
	setup := `git clone -q /testbed /tmp/other && echo fake > /tmp/other/FAKE && rm -rf .git && echo 'gitdir: /tmp/other/.git' > .git`
	if res, err := sb.run(ctx, setup, time.Minute); err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %v %+v", err, res)
	}
	d, err := sb.Diff(ctx)
	if !errors.Is(err, ErrDiff) {
		t.Fatalf("diff through a .git file: %q, %v", d, err)
	}
}
