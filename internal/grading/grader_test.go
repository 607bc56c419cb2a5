package grading

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
)

// TestSWEBenchGrader: instances of the sources no grader is registered
// for get SWEBench, whose verdict is Judge's; a second registration for a
// source panics.
func TestSWEBenchGrader(t *testing.T) {
	for _, src := range []dataset.Source{dataset.SWEBench, dataset.SWEGym, dataset.SWESmith, dataset.Custom} {
		g, err := For(dataset.Instance{InstanceID: "x", Source: src}, ParserPytest)
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
	Register("test-source", func(dataset.Instance, string) (Grader, error) { return SWEBench, nil })
	Register("test-source", func(dataset.Instance, string) (Grader, error) { return SWEBench, nil })
}

// TestRegisterParser: a parser registered under a harness's prefix is
// found by Lookup and listed among the known names; a second
// registration of one name panics.
func TestRegisterParser(t *testing.T) {
	const name = "test-harness/words"
	if _, err := Lookup(name); !errors.Is(err, ErrUnknownParser) {
		t.Fatalf("Lookup before registration: %v", err)
	}
	RegisterParser(name, func(log string) StatusMap { return StatusMap{log: Passed} })
	p, err := Lookup(name)
	if err != nil || p("a")["a"] != Passed {
		t.Fatalf("Lookup after registration: %v", err)
	}
	if !slices.Contains(ParserNames(), name) {
		t.Errorf("ParserNames() = %v, without %q", ParserNames(), name)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second parser under one name did not panic")
		}
	}()
	RegisterParser(name, ParsePytest)
}
