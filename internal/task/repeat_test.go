package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/patch"
)

// coinTests is a TestCase, appended to a test file, of n tests that each
// pass or fail on a fresh random byte: run three times, some test of 16
// flips but with probability 4^-16.
func coinTests(n int) string {
	var b strings.Builder
	b.WriteString("\n\nimport os as _msb_os\n\n\nclass TestMsbCoin(unittest.TestCase):\n")
	for i := range n {
		fmt.Fprintf(&b, "    def test_coin_%02d(self):\n        self.assertLess(_msb_os.urandom(1)[0], 128)\n\n", i)
	}
	return b.String()
}

// withTestPatch is the demo's first instance whose test patch also adds
// extra to the end of its test file.
func withTestPatch(t *testing.T, f *fixture, extra string) *Task {
	t.Helper()
	inst := f.gen.Instances[0]
	dir := filepath.Join(t.TempDir(), "x")
	hostGit(t, t.TempDir(), "clone", "-q", f.gen.RepoDir, dir)
	hostGit(t, dir, "checkout", "-q", "--detach", inst.BaseCommit)
	p := filepath.Join(t.TempDir(), "test.patch")
	writeFile(t, p, inst.TestPatch)
	hostGit(t, dir, "apply", p)
	file := patch.GitHeaderPaths(inst.TestPatch)[0]
	appendFile(t, filepath.Join(dir, file), extra)
	inst.TestPatch = hostGit(t, dir, "diff", "--no-ext-diff") + "\n"
	tk, err := New(inst, f.overrides(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestEvaluateRepeat: with Repeat, a test patch whose tests pass or fail
// at random is reported flaky, with exactly those tests that flipped, and
// the reward is marked flaky beside the first run's verdict; the stable
// instance repeated is not flaky.
func TestEvaluateRepeat(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	gold := api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}
	o := opts()

	o.Repeat = 2
	stable := Evaluate(ctx, f.env, f.task(t, 0, ""), gold, o).Result
	if stable.Outcome != api.OutcomeResolved || stable.Flaky || stable.Report.Flaky || len(stable.Report.FlakyTests) != 0 || stable.Runs != 2 {
		t.Fatalf("stable: %s flaky %v %v %q runs %d", stable.Outcome, stable.Flaky, stable.Report.Flaky, stable.Report.FlakyTests, stable.Runs)
	}

	o.Repeat = 3
	ev := Evaluate(ctx, f.env, withTestPatch(t, f, coinTests(16)), gold, o)
	r := ev.Result
	if r.Outcome != api.OutcomeResolved || !r.Flaky || !r.Report.Flaky || r.Runs != 3 || len(r.Report.FlakyTests) == 0 {
		t.Fatalf("coins: %s flaky %v %v %q runs %d\n%s", r.Outcome, r.Flaky, r.Report.Flaky, r.Report.FlakyTests, r.Runs, ev.Artifacts.RunLog)
	}
	for _, id := range r.Report.FlakyTests {
		if !strings.Contains(id, "TestMsbCoin.test_coin_") {
			t.Errorf("a stable test is reported flaky: %s", id)
		}
	}
	if !strings.Contains(ev.Artifacts.RunLog, "Repeat 3 of 3") {
		t.Errorf("the run log does not show the repeats:\n%s", ev.Artifacts.RunLog)
	}
}

// TestGradingEnvironment: the tests run without a network (loopback and
// the eth0 a sandbox shows as a container does, with no route out) and
// with TZ fixed as the harness's images fix it.
func TestGradingEnvironment(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	ifaces := `echo "msb-ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ,)"`
	routes := `echo "msb-default-routes=$(awk '$2 == "00000000"' /proc/net/route | wc -l)"`
	probe := "instances:\n  " + inst.InstanceID + ":\n    eval_commands_append:\n" +
		"      - 'echo \"msb-tz=${TZ:-unset}\"'\n" +
		"      - '" + strings.ReplaceAll(ifaces, "'", "''") + "'\n" +
		"      - '" + strings.ReplaceAll(routes, "'", "''") + "'\n"
	ev := Evaluate(context.Background(), f.env, f.task(t, 0, probe), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, opts())
	out := ev.Artifacts.TestOutput
	for _, want := range []string{"\nmsb-tz=Etc/UTC\n", "\nmsb-default-routes=0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the grading sandbox's log lacks %q:\n%s", strings.TrimSpace(want), out)
		}
	}
	if !strings.Contains(out, "\nmsb-ifaces=eth0,lo,\n") && !strings.Contains(out, "\nmsb-ifaces=lo,\n") {
		t.Errorf("the grading sandbox has interfaces besides lo and eth0:\n%s", out)
	}
	if ev.Result.Outcome != api.OutcomeResolved || ev.Result.Network != "none" {
		t.Errorf("%s network %q", ev.Result.Outcome, ev.Result.Network)
	}
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, name, body string) {
	t.Helper()
	fh, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(body); err != nil {
		t.Fatal(err)
	}
}
