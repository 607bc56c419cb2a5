package warm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// maker makes numbered values per key and records what was closed.
type maker struct {
	mu     sync.Mutex
	n      int
	closed []string
	fail   map[string]bool
	block  chan struct{} // when set, makes wait for it or the pool's close
}

func (m *maker) make(ctx context.Context, key string) (string, error) {
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail[key] {
		return "", errors.New("no")
	}
	m.n++
	return fmt.Sprintf("%s#%d", key, m.n), nil
}

func (m *maker) close(v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = append(m.closed, v)
}

func (m *maker) closedNow() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]string(nil), m.closed...)
	sort.Strings(out)
	return out
}

func newPool(m *maker, max, perKey int) *Pool[string, string] {
	return New(Options[string, string]{Make: m.make, Close: m.close, Max: max, PerKey: perKey, Idle: time.Hour})
}

// settle waits until no make is in flight.
func settle(t *testing.T, p *Pool[string, string]) Stats {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st := p.Stats(); st.Making == 0 {
			return st
		}
	}
	t.Fatal("makes never finished")
	return Stats{}
}

// TestTakeAndRefill: a miss, then the spare Refill made; values are never
// handed out twice; PerKey bounds one key's spares.
func TestTakeAndRefill(t *testing.T) {
	m := &maker{}
	p := newPool(m, 4, 2)
	defer p.Close()
	if _, ok := p.Take("a"); ok {
		t.Fatal("a spare in an empty pool")
	}
	p.Refill("a")
	p.Refill("a") // already two on the way: nothing more
	if st := settle(t, p); st.Spares != 2 || st.Made != 2 {
		t.Fatalf("after refill: %+v", st)
	}
	got := map[string]bool{}
	for range 2 {
		v, ok := p.Take("a")
		if !ok || got[v] {
			t.Fatalf("take: %q %v (had %v)", v, ok, got)
		}
		got[v] = true
	}
	if _, ok := p.Take("a"); ok {
		t.Fatal("a third spare")
	}
	if st := p.Stats(); st.Hits != 2 || st.Misses != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEvictOldestOtherKey: at Max, refilling a new key closes the spare
// of the key refilled longest ago, never one of its own.
func TestEvictOldestOtherKey(t *testing.T) {
	m := &maker{}
	p := newPool(m, 2, 1)
	defer p.Close()
	p.Refill("a")
	settle(t, p)
	p.Refill("b")
	settle(t, p)
	p.Refill("c") // evicts a's
	st := settle(t, p)
	if st.Spares != 2 || st.Evicted != 1 {
		t.Fatalf("stats %+v", st)
	}
	if c := m.closedNow(); len(c) != 1 || c[0] != "a#1" {
		t.Fatalf("closed %v", c)
	}
	if _, ok := p.Take("a"); ok {
		t.Fatal("a's spare survived eviction")
	}
	for _, k := range []string{"b", "c"} {
		if _, ok := p.Take(k); !ok {
			t.Fatalf("no spare of %s", k)
		}
	}
}

// TestExpireFailAndClose: spares past Idle are closed; a failed make
// leaves no spare; Close stops makes in flight and closes the rest.
func TestExpireFailAndClose(t *testing.T) {
	m := &maker{fail: map[string]bool{"bad": true}}
	p := newPool(m, 3, 1)
	p.Refill("a")
	p.Refill("bad")
	if st := settle(t, p); st.Spares != 1 || st.Failed != 1 {
		t.Fatalf("stats %+v", st)
	}
	p.Expire(time.Now()) // younger than Idle
	if st := p.Stats(); st.Spares != 1 {
		t.Fatalf("expired early: %+v", st)
	}
	p.Expire(time.Now().Add(2 * time.Hour))
	if st := p.Stats(); st.Spares != 0 || st.Expired != 1 {
		t.Fatalf("after expiry: %+v", st)
	}
	p.Refill("b")
	settle(t, p)
	m.block = make(chan struct{}) // the next make waits until Close
	p.Refill("c")
	p.Close()
	if c := m.closedNow(); len(c) != 2 || c[0] != "a#1" || c[1] != "b#2" {
		t.Fatalf("closed %v", c)
	}
	if st := p.Stats(); st.Spares != 0 || st.Making != 0 {
		t.Fatalf("after close: %+v", st)
	}
	p.Refill("d") // a closed pool makes nothing
	if st := p.Stats(); st.Making != 0 {
		t.Fatalf("refill after close: %+v", st)
	}
}

// TestOff: Max 0 keeps nothing.
func TestOff(t *testing.T) {
	m := &maker{}
	p := newPool(m, 0, 1)
	defer p.Close()
	p.Refill("a")
	if st := p.Stats(); st.Making != 0 || st.Spares != 0 {
		t.Fatalf("stats %+v", st)
	}
}
