package patch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestReverseUndoesWithGit applies a diff, then its Reverse, with real git
// and checks the tree is back to where it started.
func TestReverseUndoesWithGit(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	os.WriteFile(filepath.Join(dir, "a.py"), []byte("one\ntwo\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gone.py"), []byte("bye\n"), 0o644)
	run("add", "-A")
	run("commit", "-qm", "base")
	os.WriteFile(filepath.Join(dir, "a.py"), []byte("one\n2\nthree\nfour\n"), 0o644)
	os.Remove(filepath.Join(dir, "gone.py"))
	os.WriteFile(filepath.Join(dir, "new.py"), []byte("hello\n"), 0o644)
	run("add", "-A")
	diff := run("diff", "--cached")
	run("commit", "-qm", "change")
	rev := filepath.Join(dir, "..", "rev.patch")
	os.WriteFile(rev, []byte(Reverse(diff)), 0o644)
	run("apply", "--index", rev)
	if st := run("diff", "HEAD~1", "--stat"); st != "" {
		t.Fatalf("tree differs from the base after applying the reverse:\n%s\n%s", st, Reverse(diff))
	}
}

func FuzzReverse(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n")
	f.Fuzz(func(t *testing.T, s string) {
		Reverse(s)
	})
}
