package grading

import (
	"reflect"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
)

// TestSWEBenchGrader: instances of the sources no grader is registered
// for get SWEBench, whose verdict is Judge's; a second registration for a
// source panics.
func TestSWEBenchGrader(t *testing.T) {
	for _, src := range []dataset.Source{dataset.SWEBench, dataset.SWEGym, dataset.SWESmith, dataset.Custom} {
		g, err := For(dataset.Instance{InstanceID: "x", Source: src})
		if err != nil || g != SWEBench || g.Name() != "swe-bench" {
			t.Fatalf("%s: For = %v, %v", src, g, err)
		}
	}
	patch := "diff --git a/m.py b/m.py\n"
	e := Evaluation{InstanceID: "x", Repo: "o/r", Patch: &patch, Parse: ParsePytest,
		Log:      "+ : '>>>>> Start Test Output'\nPASSED t::a\nFAILED t::b\n+ : '>>>>> End Test Output'\n",
		Expected: Expected{FailToPass: []string{"t::a"}, PassToPass: []string{"t::b"}}}
	if got, want := SWEBench.Judge(e), Judge(e); !reflect.DeepEqual(got, want) {
		t.Errorf("SWEBench.Judge = %+v, Judge = %+v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second grader for one source did not panic")
		}
	}()
	Register("test-source", func(dataset.Instance) (Grader, error) { return SWEBench, nil })
	Register("test-source", func(dataset.Instance) (Grader, error) { return SWEBench, nil })
}
