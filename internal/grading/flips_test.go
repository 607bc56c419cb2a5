package grading

import (
	"reflect"
	"testing"
)

// TestFlips: a test flips when its status differs between runs, or one
// run reports it and another does not; runs without statuses do not count.
func TestFlips(t *testing.T) {
	a := StatusMap{"t1": Passed, "t2": Failed, "t3": Passed}
	for _, tc := range []struct {
		name string
		runs []StatusMap
		want []string
	}{
		{"one run", []StatusMap{a}, nil},
		{"same", []StatusMap{a, {"t1": Passed, "t2": Failed, "t3": Passed}}, nil},
		{"status", []StatusMap{a, {"t1": Failed, "t2": Failed, "t3": Passed}, a}, []string{"t1"}},
		{"missing and new", []StatusMap{a, {"t1": Passed, "t2": Failed, "t4": Skipped}}, []string{"t3", "t4"}},
		{"no statuses", []StatusMap{a, {}, nil}, nil},
	} {
		if got := Flips(tc.runs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
