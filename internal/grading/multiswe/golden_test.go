package multiswe

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// logDirs maps each framework to the folder of testdata its real logs are
// in (two parsers read ctest's output, two jest's).
var logDirs = map[string]string{
	FrameworkCargo:          "cargo",
	FrameworkGoTest:         "gotest",
	FrameworkCTestFmt:       "ctest",
	FrameworkCTestCatch2:    "ctest",
	FrameworkMocha:          "mocha",
	FrameworkJest:           "jest",
	FrameworkJestDarkreader: "jest",
	FrameworkAutomake:       "automake",
}

// parsed is a parse's answer as the golden files and oracle.py spell it.
type parsed struct {
	Passed  []string `json:"passed,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func (p parsed) norm() parsed {
	for _, l := range []*[]string{&p.Passed, &p.Failed, &p.Skipped} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return p
}

// parseAs runs msb's parser; an error is kept as whether there was one.
func parseAs(fw, log string) parsed {
	p, err := Framework(fw)
	if err != nil {
		panic(err)
	}
	r, err := Parse(p, log)
	if err != nil {
		kind := "conflict"
		if errors.Is(err, ErrNoSuite) {
			kind = "no suite"
		}
		return parsed{Error: kind}
	}
	return parsed{Passed: r.Passed.sorted(), Failed: r.Failed.sorted(), Skipped: r.Skipped.sorted()}.norm()
}

// realLogs lists, per framework, the real logs of its folder.
func realLogs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for fw, dir := range logDirs {
		logs, _ := filepath.Glob(filepath.Join("testdata", dir, "*.log"))
		sort.Strings(logs)
		out[fw] = logs
	}
	return out
}

// TestGolden: each parser reads its real logs as its golden files say.
func TestGolden(t *testing.T) {
	n := 0
	for fw, logs := range realLogs(t) {
		for _, path := range logs {
			n++
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := parseAs(fw, string(b))
			golden := strings.TrimSuffix(path, ".log") + "." + fw + ".json"
			if *update {
				out, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(golden, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			var want parsed
			b, err = os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", golden, err)
			}
			if !reflect.DeepEqual(got, want.norm()) {
				t.Errorf("%s as %s:\n got %+v\nwant %+v", path, fw, got, want)
			}
		}
	}
	if n < 6 {
		t.Fatalf("only %d real logs in testdata", n)
	}
}

// TestParsersMatchHarness gives every real log to msb's parser and to the
// harness's parse_log of every repository whose parser it is (all four
// cargo repositories, both ctest ones, ...): the statuses must be equal
// test by test, and where the harness raises msb must refuse too.
func TestParsersMatchHarness(t *testing.T) {
	logs := realLogs(t)
	var jobs []parseJob
	for _, repo := range sortedRepos() {
		job := parseJob{Repo: repo}
		for _, path := range logs[Repos[repo]] {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			job.Logs, job.Names = append(job.Logs, string(b)), append(job.Names, path)
		}
		if len(job.Logs) > 0 {
			jobs = append(jobs, job)
		}
	}
	compareWithHarness(t, jobs)
}

// parseJob is a batch of logs for one repository's parser.
type parseJob struct {
	Repo  string
	Logs  []string
	Names []string // for messages
}

// compareWithHarness parses each job's logs with msb's parser of its
// repository and with the harness's, and reports every difference. It
// returns how many logs it compared.
func compareWithHarness(t *testing.T, jobs []parseJob) int {
	t.Helper()
	var q []map[string]any
	for _, j := range jobs {
		org, name, _ := strings.Cut(j.Repo, "/")
		q = append(q, map[string]any{"org": org, "repo": name, "logs": j.Logs})
	}
	var want [][]parsed
	oracle(t, map[string]any{"parse": q}, &want)
	if len(want) != len(jobs) {
		t.Fatalf("oracle answered %d jobs for %d", len(want), len(jobs))
	}
	n := 0
	for k, j := range jobs {
		if len(want[k]) != len(j.Logs) {
			t.Fatalf("%s: oracle answered %d parses for %d logs", j.Repo, len(want[k]), len(j.Logs))
		}
		for i, text := range j.Logs {
			n++
			got, w := parseAs(Repos[j.Repo], text), want[k][i].norm()
			if (got.Error != "") != (w.Error != "") || got.Error == "" && !reflect.DeepEqual(got, w) {
				t.Errorf("%s, %s:\n msb     %#v\n harness %#v", j.Repo, j.Names[i], got, w)
			}
		}
	}
	return n
}

func sortedRepos() []string {
	out := make([]string, 0, len(Repos))
	for r := range Repos {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
