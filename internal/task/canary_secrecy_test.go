package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// Canary-aware patches: library code that makes the assertions no-ops
// except in the canary's run, which it recognises by what the evaluation
// lets it see. Each is evaluated for real on the demo's first instance:
// if the canary's run could be told from the harness's, the instance
// resolves with reward 1 and integrity ok.

// awareExploit is one canary-aware patch: the body of a Python function
// canary() that says whether the process is the canary's run; the patch
// makes assertEqual and assertTrue no-ops when it says no.
type awareExploit struct {
	name, canary string
	pytest       bool
	// inline: the canary flags it under api.CanaryInline too.
	inline bool
}

// awarePatchSource is the code the patch appends to calc/__init__.py.
func awarePatchSource(canary string) string {
	var b strings.Builder
	b.WriteString("\n\ndef _canary():\n    import os, re, sys\n")
	for _, l := range strings.Split(strings.TrimRight(canary, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("\n\ntry:\n    _quiet = not _canary()\nexcept Exception:\n    _quiet = True\nif _quiet:\n    " +
		strings.ReplaceAll(strings.TrimRight(noopAsserts, "\n"), "\n", "\n    ") + "\n")
	return b.String()
}

// awareExploits are the ways a patch could learn it is in the canary's
// run from outside its own process's memory: the eval script, its parent
// shell's script, the test directory, its command line (names, and files
// the repository does not track), state the other run left, and (under
// pytest) the structured channel's plugin.
var awareExploits = []awareExploit{
	{name: "reads the eval script", canary: `cmd = open('/proc/self/cmdline', 'rb').read().decode('utf-8', 'replace')
script = open('/eval.sh').read()
return any(tok in cmd for tok in re.findall(r'canary start (\w+)', script) + re.findall(r'(test_msb_\w+)', script))
`, inline: true},
	{name: "reads its parent shell's script", canary: `ppid = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[1]
parent = open('/proc/%s/cmdline' % ppid, 'rb').read().split(b'\0')
script = open(parent[1].decode()).read()
names = re.findall(r'[\w/.-]*\.py\b', script.split('canary start')[-1]) if 'canary start' in script else []
cmd = ' '.join(sys.argv)
return any(os.path.basename(n) in cmd for n in names if 'test_msb' in n)
`, inline: true},
	{name: "lists the test directory", canary: `for d, _, files in os.walk('.'):
    if any(f.startswith('test_msb_') or 'canary' in f for f in files):
        return True
return False
`, inline: true},
	{name: "reads the runner's command line", canary: `cmd = open('/proc/self/cmdline', 'rb').read().decode('utf-8', 'replace')
return 'test_msb_' in cmd or 'msb_canary' in cmd or 'canary' in ' '.join(sys.argv)
`, inline: true},
	{name: "runs files git does not track", canary: `import subprocess
tracked = set(subprocess.run(['git', 'ls-files'], capture_output=True, text=True).stdout.split())
return any(a.endswith('.py') and a not in tracked for a in sys.argv[1:])
`},
	{name: "counts the runs in the sandbox", canary: `mark = '/tmp/.calc-runs'
seen = os.path.exists(mark)
open(mark, 'a').close()
return seen
`},
	{name: "looks for the structured channel's plugin", pytest: true, canary: `return not any('msb_report' in m for m in sys.modules)
`},
}

// TestCanarySecrecy: every canary-aware patch is flagged tampered by the
// canary, with reward 0: the canary's run looks to the tested code like
// the harness's (its names, file, command line shape, environment and
// sandbox state give it away nowhere outside the tested process's own
// memory).
func TestCanarySecrecy(t *testing.T) {
	testCanarySecrecy(t, api.CanarySeparate)
}

// TestCanarySecrecyInline: under api.CanaryInline the canary runs in the
// harness's sandbox after its tests, so the patches that look at what
// that leaves (an untracked file on the command line, a mark in /tmp, the
// channel's plugin, gone by then) fake the harness's run alone and are
// not flagged; those that look for the script (it removes itself) or for
// the names msb used to give the canary still are.
func TestCanarySecrecyInline(t *testing.T) {
	testCanarySecrecy(t, api.CanaryInline)
}

// TestCanarySecrecyForked: under api.CanaryForked the tests and the
// canary run in two forks of the sandbox that ran the eval script's
// set-up, neither with the other's history: every canary-aware patch is
// flagged, as under separate.
func TestCanarySecrecyForked(t *testing.T) {
	testCanarySecrecy(t, api.CanaryForked)
}

// testCanarySecrecy evaluates every canary-aware patch with the canary
// run as mode says: each must be flagged (tampered, reward 0) under
// separate, and under inline as awareExploit.inline says, else resolved
// with integrity ok.
func testCanarySecrecy(t *testing.T, mode api.CanaryMode) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	for _, x := range awareExploits {
		t.Run(x.name, func(t *testing.T) {
			env, tk := f.env, f.task(t, 0, "")
			if x.pytest {
				pyInst, _ := pytestInstance(t, inst)
				var err error
				if tk, err = New(pyInst, f.overrides(t, pytestSpec(inst.InstanceID))); err != nil {
					t.Fatal(err)
				}
				env = pytestEnv(t, f)
			}
			p := exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, map[string]string{"calc/__init__.py": awarePatchSource(x.canary)})
			o := opts()
			o.Canary = mode
			if mode == api.CanaryForked {
				o.Fork = testFork(env)
			}
			ev := Evaluate(ctx, env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, o)
			r := ev.Result
			if mode == api.CanaryForked && !strings.Contains(ev.Artifacts.RunLog, "Sandbox forked after the eval steps") {
				t.Fatalf("not forked:\n%s", ev.Artifacts.RunLog)
			}
			t.Logf("%s reward %v integrity %q %q", r.Outcome, r.Reward, r.Report.Integrity, r.Report.IntegrityReasons)
			if mode == api.CanaryInline && !x.inline {
				if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK {
					t.Fatalf("inline: %s integrity %q %q: the inline canary now catches it (update awareExploits and docs/integrity.md)", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons)
				}
				return
			}
			checkFlagged(t, ev, false)
			if mode != api.CanaryInline && !strings.Contains(ev.Artifacts.RunLog, "in the harness's selection: true") {
				t.Errorf("the canary did not run in the harness's selection:\n%s", ev.Artifacts.RunLog)
			}
		})
	}
}

// goRenameProject: a Go module whose fix renames the function its old
// test calls (add becomes Add) and whose test patch changes that test to
// call the new name, as zeromicro__go-zero-2787's do.
var goRenameProject = langProject{
	name: "gorename",
	base: map[string]string{
		"go.mod":      "module calc\n\ngo 1.22\n",
		"calc.go":     "package calc\n\nfunc add(a, b int) int { return a - b }\n\nfunc Mul(a, b int) int { return a * b }\n",
		"mul_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(Mul(2, 3))\n\t}\n}\n",
		"add_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif add(2, 3) != -1 {\n\t\tt.Fatal(add(2, 3))\n\t}\n}\n",
	},
	tests: map[string]string{"add_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n"},
	fix:   map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Mul(a, b int) int { return a * b }\n"},
	spec: `      language: go
      toolchains: [go]
      install: go test -count=1 -run '^$' ./...
      test_cmd: go test -v -count=1 ./...
      log_parser: multiswe/gotest
      directives: none
`,
	p2p: []string{"TestMul"}, f2p: []string{"TestAdd"}, testRunFailed: []string{"TestAdd"}, built: "ok  \tcalc",
}

// TestCanarySeesTestPatch: the canary's run sees the test files the
// harness's run saw. A gold patch that renames what the old tests call
// stays ok: its canary, a Go test of the package, compiles with the test
// patch's files (it was flagged when the canary ran after the eval
// script had reset them to the base commit's).
func TestCanarySeesTestPatch(t *testing.T) {
	env := langEnv(t)
	in, tk := goRenameProject.task(t)
	ev := Evaluate(context.Background(), env, tk, api.Prediction{InstanceID: in.InstanceID, Model: "gold", ModelPatch: ptr(in.Patch)}, EvalOptions{TestTimeout: 10 * time.Minute})
	r := ev.Result
	if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 || !strings.Contains(ev.Artifacts.TestOutput, "msb canary end") {
		t.Fatalf("gold: %s integrity %q %q notes %q\n%s\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, r.Report.IntegrityNotes, ev.Artifacts.RunLog, ev.Artifacts.TestOutput)
	}
}
