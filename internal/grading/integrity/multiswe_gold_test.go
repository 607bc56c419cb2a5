package integrity_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// multiSWEDir holds the Multi-SWE-bench rows shared beside the repository
// (one JSONL file per repository).
const multiSWEDir = "../../../../shared/datasets/multi-swe-bench"

// TestRealMultiSWEGoldPatchesOK: no rule flags the fix patch of any
// Multi-SWE-bench row (Rust, Go, Java, JavaScript, TypeScript, C, C++),
// and every row's test patch, given as a model patch, is flagged.
func TestRealMultiSWEGoldPatchesOK(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(multiSWEDir, "*.jsonl"))
	if len(files) == 0 {
		t.Skipf("no Multi-SWE-bench rows in %s", multiSWEDir)
	}
	n, flagged := 0, 0
	for _, file := range files {
		for _, row := range multiSWERows(t, file) {
			n++
			if got := integrity.Check(row.Fix, row.Test); got.Verdict != api.IntegrityOK {
				flagged++
				t.Errorf("%s: gold patch flagged: %q", row.ID, got.Reasons())
			}
			if got := integrity.Check(row.Test, row.Test); got.Verdict != api.IntegrityTampered {
				t.Errorf("%s: test patch as a model patch not flagged", row.ID)
			}
		}
	}
	t.Logf("%d gold patches of %d files checked, %d flagged", n, len(files), flagged)
}

type multiSWERow struct {
	ID   string `json:"instance_id"`
	Fix  string `json:"fix_patch"`
	Test string `json:"test_patch"`
}

func multiSWERows(t *testing.T, file string) []multiSWERow {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var rows []multiSWERow
	for sc.Scan() {
		var r multiSWERow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rows
}
