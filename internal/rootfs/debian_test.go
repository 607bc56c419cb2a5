package rootfs

import (
	"context"
	"errors"
	"testing"
)

// TestDebianSpecKey: the key hashes the normalized inputs, so spelling the
// same inputs otherwise gives the same key and changing any one of them
// another; malformed inputs are refused with ErrDebianSpec.
func TestDebianSpecKey(t *testing.T) {
	key := func(d DebianSpec) string {
		t.Helper()
		n, err := d.Normalize()
		if err != nil {
			t.Fatalf("%+v: %v", d, err)
		}
		return n.Key()
	}
	base := DebianSpec{Suite: "bookworm", Packages: []string{"git", "python3"}}
	k := key(base)
	for _, same := range []DebianSpec{
		{Suite: "bookworm", Packages: []string{"python3", " git", "git", ""}},
		{Suite: "bookworm", Variant: "minbase", Packages: []string{"git", "python3"}, Mirror: DefaultDebianMirror + "/"},
	} {
		if got := key(same); got != k {
			t.Errorf("%+v: key %s, want %s", same, got, k)
		}
	}
	seen := map[string]string{k: "base"}
	for name, d := range map[string]DebianSpec{
		"suite":   {Suite: "trixie", Packages: base.Packages},
		"variant": {Suite: "bookworm", Variant: "essential", Packages: base.Packages},
		"package": {Suite: "bookworm", Packages: []string{"git", "python3", "hello"}},
		"date":    {Suite: "bookworm", Packages: base.Packages, Date: "20240101T000000Z"},
		"mirror":  {Suite: "bookworm", Packages: base.Packages, Mirror: "http://mirror.example/debian"},
	} {
		got := key(d)
		if other, ok := seen[got]; ok {
			t.Errorf("changing the %s gives the key of %s (%s)", name, other, got)
		}
		seen[got] = name
	}
	if n, _ := (DebianSpec{Suite: "bookworm", Date: "20240101T000000Z"}).Normalize(); n.archiveURL() != DefaultSnapshotMirror+"/20240101T000000Z" {
		t.Errorf("a date without a mirror reads from %s", n.archiveURL())
	}
	for _, bad := range []DebianSpec{
		{}, {Suite: "Bookworm"}, {Suite: "bookworm", Variant: "buildd"}, {Suite: "bookworm", Packages: []string{"a;rm"}},
		{Suite: "bookworm", Packages: []string{"--option"}}, {Suite: "bookworm", Date: "2024-01-01"},
		{Suite: "bookworm", Mirror: "file:///srv/debian"},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, ErrDebianSpec) {
			t.Errorf("%+v: %v, want ErrDebianSpec", bad, err)
		}
	}
}

// TestDebianMirrorUnavailable: a mirror that cannot serve the suite (here
// nothing listens on its port) fails before mmdebstrap runs, with
// ErrDebianMirror, and leaves no ref.
func TestDebianMirrorUnavailable(t *testing.T) {
	st := openStore(t)
	for _, d := range []DebianSpec{
		{Suite: "bookworm", Mirror: "http://127.0.0.1:1/debian"},
		{Suite: "bookworm", Mirror: "http://127.0.0.1:1/archive/debian", Date: "20240101T000000Z"},
	} {
		_, err := BuildDebian(context.Background(), st, d, DebianBuildOptions{Name: "x"})
		if !errors.Is(err, ErrDebianMirror) {
			t.Errorf("%+v: %v, want ErrDebianMirror", d, err)
		}
	}
	refs, err := st.Refs()
	if err != nil || len(refs) != 0 {
		t.Errorf("refs after failed builds: %v %v", refs, err)
	}
	if _, err := (Debian{Name: "debian/x"}).Root(context.Background(), st); !errors.Is(err, ErrNoImage) {
		t.Errorf("root of a missing base: %v, want ErrNoImage", err)
	}
}
