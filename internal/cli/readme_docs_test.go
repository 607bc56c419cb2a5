package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestReadmeNamesDocs: the README is a manual that sends its reader to
// docs/ for everything else, so every docs/ or examples/ path it names
// (in prose or in a block) must exist, and every document in docs/ must be
// named by it, so that a new document is found from the README.
func TestReadmeNamesDocs(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, p := range regexp.MustCompile(`\b(?:docs|examples)/[A-Za-z0-9_./-]*[A-Za-z0-9_-]`).FindAllString(string(readme), -1) {
		named[p] = true
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("the README names %s, which the repository lacks", p)
		}
	}
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found: the scan is broken")
	}
	for _, d := range docs {
		if name := "docs/" + filepath.Base(d); !named[name] {
			t.Errorf("the README does not name %s: add it to its table of documents", name)
		}
	}
}
