package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// sharedMultiSWE holds the Multi-SWE-bench rows shared beside the repository.
const sharedMultiSWE = "../../../shared/datasets/multi-swe-bench"

// TestIntegrityCheck: msb integrity check passes the demo's gold patches
// and reads real Multi-SWE-bench files: their gold patches are not flagged (exit 0, a row per
// repository); their test patches given as predictions all are (exit 1,
// each named with the test-file rule); a prediction for an instance of
// none of the files is a usage error.
func TestIntegrityCheck(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedMultiSWE, "*.jsonl"))
	if len(files) == 0 {
		t.Skipf("no Multi-SWE-bench rows in %s", sharedMultiSWE)
	}
	for i, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = abs
	}
	dir := t.TempDir()

	gen, _ := demoFixture(t) // the README's example
	r := msb(t, dir, nil, "integrity", "check", gen.DatasetPath)
	if r.code != 0 || !regexp.MustCompile(`(?m)^total\s+4\s+0$`).MatchString(r.stdout) {
		t.Fatalf("demo: exit %d, want 0 and 4 rows, 0 flagged\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = msb(t, dir, nil, append([]string{"integrity", "check"}, files...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "jqlang/jq") || !regexp.MustCompile(`(?m)^total\s+\d+\s+0$`).MatchString(r.stdout) {
		t.Fatalf("gold: exit %d, want 0 and a total with 0 flagged\n%s%s", r.code, r.stdout, r.stderr)
	}

	jqFile := filepath.Join(filepath.Dir(files[0]), "c__jqlang__jq.jsonl")
	var preds []string
	for _, row := range readRows(t, jqFile) {
		b, _ := json.Marshal(map[string]any{"instance_id": row["instance_id"], "model_name_or_path": "tests", "model_patch": row["test_patch"]})
		preds = append(preds, string(b))
	}
	predFile := filepath.Join(dir, "preds.jsonl")
	if err := os.WriteFile(predFile, []byte(strings.Join(preds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = msb(t, dir, nil, "integrity", "check", "--json", "--predictions", predFile, jqFile)
	var rep api.IntegrityCheckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("test patches: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if r.code != 1 || rep.Rows != len(preds) || rep.Flagged != len(preds) || len(rep.Flags) != len(preds) {
		t.Fatalf("test patches: exit %d, %d rows, %d flagged, want exit 1 and all %d flagged\n%s", r.code, rep.Rows, rep.Flagged, len(preds), r.stdout)
	}
	for _, f := range rep.Flags {
		if f.Kinds[0] != "test_file" || f.Repo != "jqlang/jq" {
			t.Errorf("%s: kinds %q repo %q, want test_file of jqlang/jq", f.InstanceID, f.Kinds, f.Repo)
		}
	}

	other := filepath.Join(filepath.Dir(jqFile), "rust__tokio-rs__bytes.jsonl")
	r = msb(t, dir, nil, "integrity", "check", "--predictions", predFile, other)
	if r.code != 2 || !strings.Contains(r.stderr, "not in the datasets given") {
		t.Fatalf("predictions of another dataset: exit %d, want 2\n%s", r.code, r.stderr)
	}
}

// readRows reads the rows of a JSONL file, each with its instance_id.
func readRows(t *testing.T, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var rows []map[string]any
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if row["instance_id"] == nil {
			t.Fatalf("%s: a row without instance_id", file)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestIntegrityCheckReposDir: with --repos-dir, msb integrity check reads
// the base Makefile.am from the row's repository (owner__name.git) at its
// base commit, as an evaluation reads it from its sandbox: a hunk that
// drops a test from a list of several lines, under a header naming
// another variable, is flagged; the row's reference fix is not.
func TestIntegrityCheckReposDir(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repos", "me__calc.git")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, "init", "-q")
	makefile := "bin_PROGRAMS = calc\n\nTESTS = tests/a \\\n\ttests/b \\\n\ttests/c\n\nEXTRA_DIST = README\n"
	if err := os.WriteFile(filepath.Join(repo, "Makefile.am"), []byte(makefile), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, "add", "-A")
	gitRun(t, repo, "commit", "-q", "-m", "base")
	base := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD"))
	fix := "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n@@ -5,3 +5,4 @@ TESTS = tests/a \\\n \ttests/c\n \n EXTRA_DIST = README\n+EXTRA_DIST += NEWS\n"
	drop := "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n@@ -4,2 +4,1 @@ EXTRA_DIST = README\n-\ttests/b \\\n \ttests/c\n"
	row, _ := json.Marshal(map[string]any{"instance_id": "me__calc-1", "repo": "me/calc", "base_commit": base, "patch": fix,
		"test_patch":   "diff --git a/tests/d b/tests/d\nnew file mode 100755\n--- /dev/null\n+++ b/tests/d\n@@ -0,0 +1 @@\n+true\n",
		"FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "version": "0.1"})
	data := filepath.Join(dir, "rows.jsonl")
	pred, _ := json.Marshal(map[string]any{"instance_id": "me__calc-1", "model_name_or_path": "m", "model_patch": drop})
	preds := filepath.Join(dir, "preds.jsonl")
	for f, b := range map[string][]byte{data: row, preds: pred} {
		if err := os.WriteFile(f, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := msb(t, dir, nil, "integrity", "check", "--repos-dir", filepath.Join(dir, "repos"), data); r.code != 0 {
		t.Fatalf("reference fix: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := msb(t, dir, nil, "integrity", "check", "--repos-dir", filepath.Join(dir, "repos"), "--predictions", preds, data)
	if r.code != 1 || !strings.Contains(r.stdout, "Makefile.am: changes make check's harness") {
		t.Fatalf("a test dropped: exit %d, want 1 and the automake reason\n%s%s", r.code, r.stdout, r.stderr)
	}
}
