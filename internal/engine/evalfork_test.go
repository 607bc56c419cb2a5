package engine

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// forkedSteps are eval steps for the demo: one that only exports (each
// fork sets it again), one that writes the repository (the fork carries
// it), as an install does; the test command's environment sees both.
const forkedSteps = `      eval_commands: ["export CALC_FORKED=set-up", "python -c 'open(\"installed.txt\", \"w\").write(\"x\")'"]
`

// appendedPatch is a diff that appends add to path, as the demo's base
// commit has it.
func appendedPatch(t *testing.T, repo, base, path, add string) string {
	t.Helper()
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", repo, "show", base+":"+path).Output()
	if err != nil {
		t.Fatal(err)
	}
	old := strings.SplitAfter(strings.TrimSuffix(string(out), "\n"), "\n")
	added := strings.SplitAfter(strings.TrimSuffix(add, "\n"), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n@@ -1,%d +1,%d @@\n", path, path, path, path, len(old), len(old)+len(added))
	for _, l := range old {
		b.WriteString(" " + strings.TrimSuffix(l, "\n") + "\n")
	}
	for _, l := range added {
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	return b.String()
}

// runTimes are what differs between two runs of the same tests.
var runTimes = regexp.MustCompile(`in [0-9.]+s`)

// TestEngineEvaluateForked evaluates the demo's first instance with the
// forked canary: the set-up runs once, the tests and the canary run in
// two forks of it. The harness's part of the log is the one the
// separate mode's harness's sandbox writes (run times aside), the gold
// patch is resolved and ok, library code that makes assertEqual a no-op
// is flagged by the canary; an eval step that may change the shell's
// state runs the evaluation as separate, with a note.
func TestEngineEvaluateForked(t *testing.T) {
	ctx := context.Background()
	g := generated(t)
	in := g.Instances[0]
	e := openEngine(t, forkedSteps, nil)

	gold, art, err := e.EvaluateCanary(ctx, in.InstanceID, "gold", ptr(in.Patch), api.CanaryForked)
	if err != nil {
		t.Fatal(err)
	}
	if gold.Outcome != api.OutcomeResolved || gold.Report.Integrity != api.IntegrityOK || len(gold.Report.IntegrityNotes) > 0 {
		t.Fatalf("gold, forked: %s, integrity %q %q, notes %q\n%s", gold.Outcome, gold.Report.Integrity, gold.Report.IntegrityReasons, gold.Report.IntegrityNotes, art.RunLog)
	}
	for _, want := range []string{"Sandbox forked after the eval steps", "forked after the eval steps, runs the tests", "Integrity canary ran beside the harness's run"} {
		if !strings.Contains(art.RunLog, want) {
			t.Errorf("run log lacks %q:\n%s", want, art.RunLog)
		}
	}
	if gold.Timings.CanaryCPU > 0 && gold.Timings.CPU <= gold.Timings.CanaryCPU {
		t.Errorf("CPU time %d not above the canary's %d", gold.Timings.CPU, gold.Timings.CanaryCPU)
	}
	_, sepArt, err := e.EvaluateCanary(ctx, in.InstanceID, "gold", ptr(in.Patch), api.CanarySeparate)
	if err != nil {
		t.Fatal(err)
	}
	harnessPart := func(log string) string {
		part, _, _ := strings.Cut(log, ">>>>> msb canary start")
		return runTimes.ReplaceAllString(part, "in TIME")
	}
	if f, s := harnessPart(art.TestOutput), harnessPart(sepArt.TestOutput); f != s {
		t.Errorf("the harness's log, forked:\n%s\nseparate:\n%s", f, s)
	}
	for _, want := range []string{"+ export CALC_FORKED=set-up", "+ python -c", "+ git apply -v -", ">>>>> Start Test Output", "msb canary end"} {
		if !strings.Contains(art.TestOutput, want) {
			t.Errorf("forked log lacks %q:\n%s", want, art.TestOutput)
		}
	}

	exploit := appendedPatch(t, g.RepoDir, in.BaseCommit, "calc/__init__.py",
		"import unittest\nunittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\nunittest.TestCase.assertTrue = lambda self, expr, msg=None: None\n")
	r, art, err := e.EvaluateCanary(ctx, in.InstanceID, "x", &exploit, api.CanaryForked)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Integrity != api.IntegrityTampered || !strings.Contains(strings.Join(r.Report.IntegrityReasons, ";"), "canary:") || !strings.Contains(art.RunLog, "Sandbox forked after the eval steps") {
		t.Fatalf("exploit, forked: %s, integrity %q %q\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, art.RunLog)
	}

	// A step that changes the shell: no safe split point.
	e2 := openEngine(t, `      eval_commands: ["cd . && true"]
`, nil)
	r, art, err = e2.EvaluateCanary(ctx, in.InstanceID, "gold", ptr(in.Patch), api.CanaryForked)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 1 ||
		!strings.HasPrefix(r.Report.IntegrityNotes[0], "canary forked: ran as separate: eval step") || strings.Contains(art.RunLog, "forked after") {
		t.Fatalf("gold, forked with a cd: %s, integrity %q, notes %q\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityNotes, art.RunLog)
	}
}

// storeNames lists the names under a store's layers, manifests, objects
// and inodes directories.
func storeNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range []string{"layers", "manifests", "objects", "inodes"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if dir == "layers" && d.IsDir() && filepath.Dir(p) != filepath.Join(root, dir) && p != filepath.Join(root, dir) {
				return fs.SkipDir // a layer's tree: its name is the layer
			}
			if !d.IsDir() || dir == "layers" {
				names[strings.TrimPrefix(p, root)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// TestEngineForkedDropsLayer: a forked evaluation drops its set-up's
// layer from the store as it ends, with the content it brought: after
// evaluations of a gold patch, an exploit and a failing patch (and a
// pair of the same row at once in the default mode, both graded as
// alone), the store holds the names it held before them, no more.
func TestEngineForkedDropsLayer(t *testing.T) {
	ctx := context.Background()
	g := generated(t)
	in := g.Instances[0]
	e := openEngine(t, forkedSteps, nil)
	root := e.cache.st().Root()
	// The first builds what every evaluation of the row uses.
	if r, art, err := e.EvaluateCanary(ctx, in.InstanceID, "gold", ptr(in.Patch), api.CanaryForked); err != nil || r.Outcome != api.OutcomeResolved {
		t.Fatalf("gold, forked: %v %v\n%s", r.Outcome, err, art.RunLog)
	}
	before := storeNames(t, root)

	exploit := appendedPatch(t, g.RepoDir, in.BaseCommit, "calc/__init__.py",
		"import unittest\nunittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\n")
	broken := appendedPatch(t, g.RepoDir, in.BaseCommit, "calc/__init__.py", "raise ImportError('no')\n")
	for _, p := range []struct{ name, patch string }{{"gold", in.Patch}, {"exploit", exploit}, {"broken", broken}} {
		r, art, err := e.EvaluateCanary(ctx, in.InstanceID, p.name, &p.patch, api.CanaryForked)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(art.RunLog, "Sandbox forked after the eval steps") || !strings.Contains(art.RunLog, "dropped from the store") {
			t.Errorf("%s (%s): the run log says no drop of the set-up's layer:\n%s", p.name, r.Outcome, art.RunLog)
		}
	}

	// Two at once, in the default mode (forked): the same patch of the
	// same row may make the same layer, which the first to end keeps for
	// the other.
	type res struct {
		r   api.EvalResult
		log string
		err error
	}
	out := make(chan res, 2)
	for range 2 {
		go func() {
			r, art, err := e.Evaluate(ctx, in.InstanceID, "gold", ptr(in.Patch))
			out <- res{r, art.RunLog, err}
		}()
	}
	for range 2 {
		x := <-out
		if x.err != nil || x.r.Outcome != api.OutcomeResolved || x.r.Report.Integrity != api.IntegrityOK || len(x.r.Report.IntegrityNotes) > 0 ||
			!strings.Contains(x.log, "Sandbox forked after the eval steps") {
			t.Errorf("gold, forked, two at once: %v %s, integrity %q %q, notes %q\n%s", x.err, x.r.Outcome, x.r.Report.Integrity,
				x.r.Report.IntegrityReasons, x.r.Report.IntegrityNotes, x.log)
		}
		for _, l := range strings.Split(x.log, "\n") {
			if strings.Contains(l, "Set-up's layer") {
				t.Log(l)
			}
		}
	}

	after := storeNames(t, root)
	for n := range after {
		if !before[n] {
			t.Errorf("the store holds %s, made by the forked evaluations", n)
		}
	}
}

// TestEngineForkedDropsLayerAtEnd: a forked evaluation whose tests time
// out, and one cancelled while its tests run, drop the set-up's layer
// too.
func TestEngineForkedDropsLayerAtEnd(t *testing.T) {
	ctx := context.Background()
	g := generated(t)
	in := g.Instances[0]
	slow := forkedSteps + fmt.Sprintf("instances:\n  %s:\n    test_cmd: \"sleep 120 && python -m unittest -v\"\n", in.InstanceID)
	e := openEngine(t, slow, func(c *Config) { c.TestTimeout = 20 * time.Second })
	r, art, err := e.Evaluate(ctx, in.InstanceID, "gold", ptr(in.Patch))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != api.OutcomeTestTimeout || !strings.Contains(art.RunLog, "Sandbox forked after the eval steps") || !strings.Contains(art.RunLog, "dropped from the store") {
		t.Fatalf("tests past the timeout: %s; the run log:\n%s", r.Outcome, art.RunLog)
	}
	root := e.cache.st().Root()
	before := storeNames(t, root)
	cctx, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	r, art, err = e.Evaluate(cctx, in.InstanceID, "gold", ptr(in.Patch))
	t.Logf("cancelled: %s %v; forked before: %v", r.Outcome, err, strings.Contains(art.RunLog, "Sandbox forked after the eval steps"))
	for n := range storeNames(t, root) {
		if !before[n] {
			t.Errorf("the store holds %s, made by the cancelled evaluation\n%s", n, art.RunLog)
		}
	}
}
