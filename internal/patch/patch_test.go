package patch

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	tests := []struct {
		name string
		diff string
		want []File
	}{
		{"modify", "diff --git a/x/y.py b/x/y.py\nindex 1..2 100644\n--- a/x/y.py\n+++ b/x/y.py\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n",
			[]File{{"x/y.py", "x/y.py", Modified, false}}},
		{"add", "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n",
			[]File{{"", "n.py", Added, false}}},
		{"delete", "diff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
			[]File{{"d.py", "", Deleted, false}}},
		{"rename", "diff --git a/o.py b/n.py\nsimilarity index 90%\nrename from o.py\nrename to n.py\n",
			[]File{{"o.py", "n.py", Renamed, false}}},
		{"binary", "diff --git a/i.png b/i.png\nindex 1..2\nBinary files a/i.png and b/i.png differ\n",
			[]File{{"i.png", "i.png", Modified, true}}},
		{"spaces in name", "diff --git a/my dir/f b.py b/my dir/f b.py\n--- a/my dir/f b.py\n+++ b/my dir/f b.py\n@@ -1 +1 @@\n-a\n+b\n",
			[]File{{"my dir/f b.py", "my dir/f b.py", Modified, false}}},
		{"quoted", "diff --git \"a/t\\303\\251st.py\" \"b/t\\303\\251st.py\"\n--- \"a/t\\303\\251st.py\"\n+++ \"b/t\\303\\251st.py\"\n@@ -1 +1 @@\n-a\n+b\n",
			[]File{{"tést.py", "tést.py", Modified, false}}},
		{"plain unified", "--- old/a.txt\t2020-01-01\n+++ new/a.txt\t2020-01-02\n@@ -1 +1 @@\n-a\n+b\n",
			[]File{{"old/a.txt", "new/a.txt", Modified, false}}},
		{"minus lines in hunk are not headers", "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,1 @@\n--- a/evil.py\n+++ b/evil.py\n",
			[]File{{"a.py", "a.py", Modified, false}}},
		{"two files and crlf", "diff --git a/a.py b/a.py\r\n--- a/a.py\r\n+++ b/a.py\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\ndiff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+b\n",
			[]File{{"a.py", "a.py", Modified, false}, {"b.py", "b.py", Modified, false}}},
		{"junk", "hello\nworld\n@@ nonsense\n", nil},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Files(tc.diff); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Files = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestHarnessRegexes(t *testing.T) {
	diff := "diff --git a/tests/a b/c.py b/tests/a b/c.py\n--- a/tests/a b/c.py\n+++ b/tests/a b/c.py\n@@ -1 +1 @@\n--- a/inside.py\n+x\n"
	if got, want := GitHeaderPaths(diff), []string{"c.py"}; !reflect.DeepEqual(got, want) {
		t.Errorf("GitHeaderPaths = %q, want %q (last ' b/' wins, as in the harness)", got, want)
	}
	if got, want := MinusPaths(diff), []string{"tests/a b/c.py", "inside.py"}; !reflect.DeepEqual(got, want) {
		t.Errorf("MinusPaths = %q, want %q", got, want)
	}
}

// TestRealTestPatches checks, on every test_patch of the real dataset, that
// the robust reader and the harness's regular expression agree.
func TestRealTestPatches(t *testing.T) {
	f, err := os.Open("../../../shared/datasets/swe-bench-verified.jsonl")
	if err != nil {
		t.Skipf("dataset not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		var row struct {
			ID        string `json:"instance_id"`
			TestPatch string `json:"test_patch"`
			Patch     string `json:"patch"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{row.TestPatch, row.Patch} {
			if got, want := Paths(d), GitHeaderPaths(d); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: Paths = %q, harness = %q", row.ID, got, want)
			}
		}
		n++
	}
	if n != 500 {
		t.Errorf("read %d rows, want 500", n)
	}
}

func FuzzFiles(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("diff --git \"a/\\303\" b/y\nrename from a\nrename to b\n")
	f.Add("--- a\n+++ b\n@@ -1,99999999999 +1 @@\n")
	f.Fuzz(func(t *testing.T, diff string) {
		for _, file := range Files(diff) {
			if file.OldPath == "" && file.NewPath == "" {
				t.Fatalf("file without a path from %q", diff)
			}
			if strings.Contains(file.OldPath+file.NewPath, "\n") {
				t.Fatalf("path spans lines: %#v", file)
			}
		}
		GitHeaderPaths(diff)
		MinusPaths(diff)
	})
}
