package demo

import (
	"context"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
)

func TestGenerateMeasuresTests(t *testing.T) {
	g, err := Generate(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Instances) != len(Bugs) {
		t.Fatalf("%d instances", len(g.Instances))
	}
	for _, in := range g.Instances {
		if len(in.FailToPass) != 1 || len(in.PassToPass) < 1 || in.Patch == "" || in.TestPatch == "" {
			t.Errorf("%s: F2P %v P2P %v", in.InstanceID, in.FailToPass, in.PassToPass)
		}
	}
	loaded, rowErrs, err := dataset.Load(g.DatasetPath, dataset.Filter{})
	if err != nil || len(rowErrs) > 0 || len(loaded) != len(Bugs) {
		t.Fatalf("reloading the dataset: %v %v %d", err, rowErrs, len(loaded))
	}
	if loaded[0].RepoURL == "" {
		t.Fatal("repo_url lost")
	}
}
