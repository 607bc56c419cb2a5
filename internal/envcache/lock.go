package envcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile is an exclusive flock on a file in <cache>/locks. Each lock
// opens its own file description, so goroutines of one process exclude each
// other as processes do; the kernel drops it when its holder dies.
type lockFile struct{ f *os.File }

// lock waits for the named lock or for ctx. wait is called once if the lock
// is held by someone else.
func (c *Cache) lock(ctx context.Context, name string, wait func()) (*lockFile, error) {
	p := filepath.Join(c.dir, "locks", name+".lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", p, err)
	}
	delay := 5 * time.Millisecond
	for first := true; ; first = false {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &lockFile{f: f}, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("taking lock %s: %w", p, err)
		}
		if first && wait != nil {
			wait()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

func (l *lockFile) unlock() { l.f.Close() }
