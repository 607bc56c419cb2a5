package envcache

import (
	"context"
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/store"
)

// TestColdBaseLeased: the base's trees stay warm while its files are read
// (baseFile), though an msb cache compact --all runs meanwhile: base()
// thaws a cold base under a lease, as a layer mount does, held until
// release; a spec base too. After the release the compaction takes them.
func TestColdBaseLeased(t *testing.T) {
	ctx := context.Background()
	c, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lower := commitFile(t, c, "lower", "the base's lower")
	top := commitFile(t, c, "top", "the base's top", lower)
	if err := c.store.SetRef(ctx, RootfsRef, top); err != nil {
		t.Fatal(err)
	}
	c.opts.Base = RootfsRef
	compactAll := func() store.CompactReport {
		t.Helper()
		r, err := c.store.Compact(ctx, store.CompactOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		resolve func() (baseInfo, error)
	}{
		{"cache base", func() (baseInfo, error) { return c.base(ctx) }},
		{"spec base", func() (baseInfo, error) { return c.resolveBase(ctx, RootfsRef) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := compactAll(); !c.store.Compacted(lower) || !c.store.Compacted(top) {
				t.Fatalf("compacting the base before: %+v", r)
			}
			base, err := tc.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if r := compactAll(); len(r.Layers) != 0 || r.Leased != 2 {
				t.Errorf("compact --all while the base is read: %+v, want both base layers left as leased", r)
			}
			for _, name := range []string{"lower", "top"} {
				p, ok := c.baseFile(base, name)
				if !ok {
					t.Fatalf("the base's %s is gone while its files are read", name)
				}
				if b, err := os.ReadFile(p); err != nil || string(b) != "the base's "+name {
					t.Fatalf("the base's %s: %q %v", name, b, err)
				}
			}
			base.release()
			if r := compactAll(); len(r.Layers) != 2 {
				t.Errorf("compact --all after the release: %+v, want the base's two layers", r)
			}
		})
	}
}
