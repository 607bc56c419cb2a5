package mount

import (
	"strings"
	"testing"
)

func TestOverlayOrdersLowersTopFirst(t *testing.T) {
	m, err := Overlay("/m", OverlayOptions{Lowers: []string{"/base", "/env", "/repo"}, Upper: "/u", Work: "/w", UserXattr: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "lowerdir=/repo:/env:/base,upperdir=/u,workdir=/w,userxattr"
	if m.Data != want {
		t.Fatalf("data = %q, want %q", m.Data, want)
	}
}

func TestOverlayVolatileNeedsUpper(t *testing.T) {
	for _, tc := range []struct {
		opts OverlayOptions
		want string
	}{
		{OverlayOptions{Lowers: []string{"/l"}, Upper: "/u", Work: "/w", Volatile: true}, "lowerdir=/l,upperdir=/u,workdir=/w,volatile"},
		{OverlayOptions{Lowers: []string{"/l"}, Volatile: true}, "lowerdir=/l"}, // read-only: nothing to sync
	} {
		m, err := Overlay("/m", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if m.Data != tc.want {
			t.Errorf("data = %q, want %q", m.Data, tc.want)
		}
	}
}

func TestOverlayRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts OverlayOptions
		want string
	}{
		{"no lowers", OverlayOptions{}, "at least one lower"},
		{"colon", OverlayOptions{Lowers: []string{"/a:b"}}, "cannot take"},
		{"too long", OverlayOptions{Lowers: []string{"/" + strings.Repeat("x", 5000)}}, "exceed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Overlay("/m", tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestBindReadOnlyAddsRemount(t *testing.T) {
	ms := Bind("/usr", "/r/usr", true)
	if len(ms) != 2 || ms[1].Flags&msRemount == 0 || ms[1].Flags&msRdonly == 0 {
		t.Fatalf("unexpected plan %v", ms)
	}
	if got := Bind("/a", "/b", false); len(got) != 1 {
		t.Fatalf("rw bind should be one mount, got %v", got)
	}
}

func TestErrorNamesTheMount(t *testing.T) {
	err := Mount{Source: "/nonexistent-src", Target: "/nonexistent-target", Flags: msBind}.Mount()
	if err == nil || !strings.Contains(err.Error(), "/nonexistent-target") || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("error should name target and flags: %v", err)
	}
}
