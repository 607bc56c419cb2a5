package envlist

import (
	"slices"
	"testing"
)

func TestMerge(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root", "LANG=C"}
	over := []string{"HOME=/home/u", "EMPTY=", "NOVALUE", "PATH=/usr/bin:/bin"}
	got := Merge(base, over)
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C", "EMPTY=", "NOVALUE"}
	if !slices.Equal(got, want) {
		t.Fatalf("Merge = %q, want %q", got, want)
	}
	if base[0] != "PATH=/bin" || len(base) != 3 {
		t.Fatalf("Merge changed its base: %q", base)
	}
	if got := Merge(nil, []string{"A=1", "A=2"}); !slices.Equal(got, []string{"A=2"}) {
		t.Fatalf("a name twice in over: %q, want the last", got)
	}
}
