package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// A barrier is a point of a commit before which what the commit wrote
// since the previous barrier must be durable, because the next step (a
// link or rename) publishes it under a name: content before the object
// names that promise it, a layer's tree, manifest and object links before
// the rename that makes the layer present. A barrier collects the files
// and directories to flush and flush makes them durable: with an fsync
// each, in parallel, when they are few; with one syncfs(2) of the store's
// filesystem when they are many, or when the commit made an inode that
// cannot be fsynced by itself (a symlink, device, fifo or whiteout).
// syncfs writes out everything anyone wrote to the filesystem, so on a
// busy machine it costs far more than a few fsyncs of one's own files,
// while for a commit of thousands of files it is the cheaper one.
type barrier struct {
	s *Store

	mu    sync.Mutex // guards the fields below: trees are written in parallel
	paths []string
	seen  map[string]bool
	whole bool
}

const (
	// maxFsyncs is the number of paths above which a barrier syncs the
	// whole filesystem instead.
	maxFsyncs = 128
	// fsyncWorkers is how many fsyncs run at once: they wait on the
	// disk, not the CPU, and concurrent ones share journal commits.
	fsyncWorkers = 16
)

func (s *Store) newBarrier() *barrier { return &barrier{s: s, seen: map[string]bool{}} }

// add records files or directories to flush at the next barrier.
func (b *barrier) add(paths ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range paths {
		if !b.seen[p] {
			b.seen[p] = true
			b.paths = append(b.paths, p)
		}
	}
}

// addWhole records that something was written that only a syncfs makes
// durable.
func (b *barrier) addWhole() {
	b.mu.Lock()
	b.whole = true
	b.mu.Unlock()
}

// flush makes what was added durable and starts a new barrier. It is not
// cut short by a cancelled context: a half-flushed barrier must not be
// passed anyway, and an error is returned instead.
func (b *barrier) flush() error {
	b.mu.Lock()
	paths, whole := b.paths, b.whole
	b.paths, b.seen, b.whole = nil, map[string]bool{}, false
	b.mu.Unlock()
	if len(paths) == 0 && !whole {
		return nil
	}
	whole = whole || len(paths) > maxFsyncs
	if b.s.hooks.flush != nil {
		b.s.hooks.flush(paths, whole)
	}
	if whole {
		return b.s.syncFS()
	}
	err := parallel(context.Background(), fsyncWorkers, len(paths), func(_ context.Context, i int) error {
		return fsyncPath(paths[i])
	})
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		// A rootless store's file whose mode denies its owner reading
		// (content readable by others only, as committed) cannot be
		// opened to fsync it: sync the filesystem instead.
		return b.s.syncFS()
	}
	return err
}

// fsyncPath fsyncs a file or directory by name.
func fsyncPath(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening %s to fsync it: %w", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}
