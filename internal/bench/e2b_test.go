package bench

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BBench runs msb bench e2b CI-sized against a real msb serve
// --e2b and the e2b SDK: every measure of every path has its samples,
// the load run of the async SDK loses and mixes no command, the fork of
// children to a first command in each is timed through the SDK and the
// native API, and the report gives the load and the fork rows.
func TestE2BBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs msb serve and the e2b SDK")
	}
	py := privtest.Python(t, "the e2b SDK (internal/server/testdata/requirements.txt)")
	if out, err := exec.Command(py, "-c", "import e2b").CombinedOutput(); err != nil {
		privtest.Skip(t, "%s=%s lacks the e2b SDK: %v %s", privtest.PythonEnv, py, err, out)
	}
	exe, args := buildMSB(t)
	rep := E2B(context.Background(), E2BOptions{Exe: exe, StateDir: args[1], ServeArgs: []string{"--cache", filepath.Join(t.TempDir(), "cache")},
		Python: py, Rounds: 2, Gap: 10 * time.Millisecond, RTT: 3, Sandboxes: 3, Commands: 4, Concurrency: 2, Forks: 3, ForkRounds: 2})
	if rep.Failed != "" {
		t.Fatal(rep.Failed)
	}
	want := map[string]int{E2BCreateFirst: 2, E2BCommand: 3, E2BFork: 2}
	for _, path := range []string{E2BPathE2B, E2BPathNative} {
		if n := len(rep.Times[E2BFork][path]); n != 2 {
			t.Errorf("fork of %s: %d samples, want 2", path, n)
		}
	}
	for _, row := range e2bRows {
		if n := len(rep.Times[row.measure][row.path]); n != want[row.measure] {
			t.Errorf("%s of %s: %d samples, want %d", row.measure, row.path, n, want[row.measure])
		}
	}
	if l := rep.Load; l == nil || l.Sandboxes != 3 || l.Commands != 4 || l.Lost != 0 || l.Mixed != 0 || l.Wall <= 0 {
		t.Errorf("load run: %+v, want 3 sandboxes × 4 commands, none lost or mixed", l)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, s := range []string{"native exec bash -l -c true", "a stub that answers at once", "0 lost, 0 mixed", "load average before",
		"concurrent fork(count≤20) calls", "native fork of the same parent", "3 children a round"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, text.String())
		}
	}
}

// TestE2BBenchOptions: options the benchmark cannot run are refused
// before anything starts.
func TestE2BBenchOptions(t *testing.T) {
	for _, o := range []E2BOptions{
		{Python: "python3", Rounds: 0, RTT: 1},
		{Python: "python3", Rounds: 1, RTT: 0},
		{Python: "python3", Rounds: 1, RTT: 1, Sandboxes: 2, Commands: 0, Concurrency: 1},
		{Rounds: 1, RTT: 1},
		{Python: "python3", Rounds: 1, RTT: 1, Forks: -1},
		{Python: "python3", Rounds: 1, RTT: 1, Forks: 257, ForkRounds: 1},
		{Python: "python3", Rounds: 1, RTT: 1, Forks: 2, ForkRounds: 0},
	} {
		if err := runE2B(context.Background(), o, &E2BReport{}); !errors.Is(err, ErrE2BOptions) {
			t.Errorf("%+v: %v, want ErrE2BOptions", o, err)
		}
	}
}
