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
	return New(Options[string, string]{Make: m.make, Close: m.close, Max: max, Size: func(string) int { return perKey }, Idle: time.Hour})
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
// handed out twice; a key's default size bounds its spares.
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

// TestKeepDropShed: Keep sets a key's size (bounded by Max) over the
// default, Refill keeps it; Drop closes a key's spares and forgets its
// size; Shed closes the oldest spare; stats are kept by class; a dead
// spare is closed, not taken.
func TestKeepDropShed(t *testing.T) {
	m := &maker{}
	dead := map[string]bool{}
	var mu sync.Mutex
	p := New(Options[string, string]{Make: m.make, Close: m.close, Max: 4, Idle: time.Hour,
		Size:  func(k string) int { return map[bool]int{true: 0, false: 1}[k[0] == 's'] },
		Class: func(k string) string { return k[:1] },
		Alive: func(v string) bool { mu.Lock(); defer mu.Unlock(); return !dead[v] }})
	defer p.Close()
	p.Refill("snap") // size 0 until asked
	if st := settle(t, p); st.Made != 0 {
		t.Fatalf("a key of size 0 got spares: %+v", st)
	}
	p.Keep("snap", 9) // bounded by Max
	if st := settle(t, p); st.Spares != 4 || st.Refills != 1 || st.RefillTime <= 0 {
		t.Fatalf("after Keep 9: %+v", st)
	}
	v, ok := p.Take("snap")
	if !ok {
		t.Fatal("no spare of snap")
	}
	p.Refill("snap") // the recorded size, not the default
	if st := settle(t, p); st.Spares != 4 || st.Made != 5 {
		t.Fatalf("after a refill: %+v", st)
	}
	mu.Lock()
	dead["snap#2"] = true
	mu.Unlock()
	for range 2 {
		if w, ok := p.Take("snap"); !ok || w == "snap#2" || w == v {
			t.Fatalf("take: %q %v", w, ok)
		}
	}
	if !slicesHave(m.closedNow(), "snap#2") {
		t.Fatalf("the dead spare was not closed: %v", m.closedNow())
	}
	p.Refill("img")
	settle(t, p)
	if !p.Shed() { // the oldest: snap#5
		t.Fatal("nothing to shed")
	}
	if !slicesHave(m.closedNow(), "snap#5") {
		t.Fatalf("shed the wrong spare: %v", m.closedNow())
	}
	p.Drop("img")
	p.Refill("snap") // size 4 again
	by := settle(t, p)
	if by.Spares != 4 {
		t.Fatalf("after drop and refill: %+v", by)
	}
	st := p.StatsBy()
	if s, i := st["s"], st["i"]; s.Spares != 4 || s.Shed != 1 || s.Hits != 3 || i.Made != 1 || i.Spares != 0 {
		t.Fatalf("by class: %+v", st)
	}
	if p.Shed(); p.Stats().Shed != 2 {
		t.Fatalf("stats %+v", p.Stats())
	}
}

// TestDropDuringRefill: a spare made after its key was dropped is closed,
// not kept.
func TestDropDuringRefill(t *testing.T) {
	m := &maker{block: make(chan struct{})}
	p := newPool(m, 2, 1)
	defer p.Close()
	p.Refill("a")
	p.Drop("a")
	close(m.block)
	if st := settle(t, p); st.Spares != 0 || st.Made != 0 {
		t.Fatalf("a dropped key kept a spare: %+v", st)
	}
	if c := m.closedNow(); len(c) != 1 {
		t.Fatalf("closed %v", c)
	}
}

func slicesHave(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
