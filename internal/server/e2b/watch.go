package e2b

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
)

const (
	maxWatchers    = 64    // watchers of one sandbox at once
	maxWatchEvents = 4096  // events a watcher keeps until they are read; later ones are dropped
	maxWatchDirs   = 16384 // directories one recursive watcher watches
)

// watchMask is what a watch asks inotify for: the changes E2B's event
// types name, and the end of the directory itself.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

var (
	// errDirGone ends a watch whose directory was removed (or its
	// filesystem unmounted): a stream ends cleanly.
	errDirGone = errors.New("the watched directory is gone")
	// errWatchClosed ends the watches of a sandbox that was closed or
	// paused, and a watcher that was removed.
	errWatchClosed = fmt.Errorf("the watch was closed with its sandbox or removed: %w", engine.ErrGone)
)

// watcher is one directory watch: an inotify instance on the sandbox's own
// view of a directory (paths resolved inside /proc/<init>/root, never out
// of it through a symlink) and a bounded queue of its events. Its reader
// goroutine alone adds and removes inotify watches.
type watcher struct {
	id        string
	dir       string // the watched directory, absolute in the sandbox
	recursive bool
	root      *os.File // the sandbox's root, /proc/<init>/root
	in        *os.File // the inotify instance, non-blocking
	raw       syscall.RawConn
	wds       map[int32]string // watch descriptor -> its directory relative to dir ("" is dir); the reader's
	once      sync.Once        // closes root and in

	mu      sync.Mutex // guards the fields below
	events  []*filesystem.FilesystemEvent
	dropped int
	end     error         // why the watch ended; nil while it runs
	ready   chan struct{} // closed (and replaced) when events come or the watch ends
}

// openWatcher watches dir inside the sandbox whose init is pid, and the
// directories under it when recursive.
func openWatcher(pid int, dir string, recursive bool) (*watcher, error) {
	root, err := os.OpenFile(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox's root: %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("%w: no inotify instance for a watch (fs.inotify.max_user_instances): %v", engine.ErrQuota, err)
	}
	w := &watcher{id: newToken(), dir: dir, recursive: recursive, root: root, in: os.NewFile(uintptr(fd), "inotify"),
		wds: map[int32]string{}, ready: make(chan struct{})}
	if w.raw, err = w.in.SyscallConn(); err == nil {
		err = w.add("")
	}
	if err != nil {
		w.close(err)
		return nil, err
	}
	go w.read()
	return w, nil
}

// add watches the directory rel (relative to w.dir) and, for a recursive
// watcher, the directories under it.
func (w *watcher) add(rel string) error {
	p := path.Join(w.dir, rel)
	fd, err := w.openIn(p)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("watching %s: %w", p, engine.ErrNotFound)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("watching %s: not a directory: %w", p, engine.ErrBadRequest)
	case err != nil:
		return fmt.Errorf("opening %s to watch it: %w", p, err)
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	if len(w.wds) >= maxWatchDirs {
		return fmt.Errorf("%w: a watch covers at most %d directories", engine.ErrQuota, maxWatchDirs)
	}
	var wd int
	cerr := w.raw.Control(func(ifd uintptr) {
		wd, err = unix.InotifyAddWatch(int(ifd), fmt.Sprintf("/proc/self/fd/%d", fd), watchMask)
	})
	if err = errors.Join(cerr, err); err != nil {
		return fmt.Errorf("watching %s: %w", p, err)
	}
	w.wds[int32(wd)] = rel
	if !w.recursive {
		return nil
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("listing %s to watch it: %w", p, err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		// A directory removed since the listing is no error.
		if err := w.add(path.Join(rel, e.Name())); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
	}
	return nil
}

// openIn opens the directory p of the sandbox, resolved inside its root;
// the root stays open while it does (a close waits).
func (w *watcher) openIn(p string) (int, error) {
	rc, err := w.root.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(root uintptr) {
		fd, err = unix.Openat2(int(root), p, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	})
	if cerr != nil {
		return -1, cerr
	}
	return fd, err
}

// unwatch stops watching the directory rel and those under it (moved out
// of the watched tree, or to be watched again under their new name).
func (w *watcher) unwatch(rel string) {
	for wd, r := range w.wds {
		if r == rel || strings.HasPrefix(r, rel+"/") {
			w.raw.Control(func(ifd uintptr) { unix.InotifyRmWatch(int(ifd), uint32(wd)) })
			delete(w.wds, wd)
		}
	}
}

// read queues inotify's events until the watch ends.
func (w *watcher) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.in.Read(buf)
		if err != nil {
			w.close(fmt.Errorf("reading the watch's events: %w", err))
			return
		}
		if w.handle(buf[:n]) {
			return
		}
	}
}

// handle queues the events in buf, as E2B names them, and follows the
// directories a recursive watch covers; it reports whether the watch ended.
func (w *watcher) handle(buf []byte) bool {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:]))
		mask := binary.NativeEndian.Uint32(buf[4:])
		n := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:]))
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:min(n, len(buf))]), "\x00")
		buf = buf[min(n, len(buf)):]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			w.drop()
			continue
		}
		rel, ok := w.wds[wd]
		if !ok {
			continue
		}
		if mask&unix.IN_IGNORED != 0 {
			delete(w.wds, wd)
			if rel == "" {
				w.close(fmt.Errorf("%s: %w", w.dir, errDirGone))
				return true
			}
			continue
		}
		if name == "" {
			continue // the directory itself: its parent's watch reports it
		}
		p := path.Join(rel, name)
		if w.recursive && mask&unix.IN_ISDIR != 0 {
			if mask&unix.IN_MOVED_FROM != 0 {
				w.unwatch(p)
			}
			if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				w.add(p) // best effort: it may be gone already
			}
		}
		if t := eventType(mask); t != filesystem.EventType_EVENT_TYPE_UNSPECIFIED {
			w.push(&filesystem.FilesystemEvent{Name: p, Type: t})
		}
	}
	return false
}

// eventType is E2B's name of an inotify event, as fsnotify (which E2B's
// envd uses) names it: a rename is reported under the old name, the new
// name is a create.
func eventType(mask uint32) filesystem.EventType {
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		return filesystem.EventType_EVENT_TYPE_CREATE
	case mask&unix.IN_MODIFY != 0:
		return filesystem.EventType_EVENT_TYPE_WRITE
	case mask&unix.IN_DELETE != 0:
		return filesystem.EventType_EVENT_TYPE_REMOVE
	case mask&unix.IN_MOVED_FROM != 0:
		return filesystem.EventType_EVENT_TYPE_RENAME
	case mask&unix.IN_ATTRIB != 0:
		return filesystem.EventType_EVENT_TYPE_CHMOD
	}
	return filesystem.EventType_EVENT_TYPE_UNSPECIFIED
}

// push queues ev, or drops it when the queue is full.
func (w *watcher) push(ev *filesystem.FilesystemEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) >= maxWatchEvents {
		w.dropped++
		return
	}
	w.events = append(w.events, ev)
	w.wake()
}

// drop counts events inotify itself dropped (its queue overflowed).
func (w *watcher) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropped++
}

// wake tells a waiting reader that something changed. w.mu is held.
func (w *watcher) wake() {
	close(w.ready)
	w.ready = make(chan struct{})
}

// take is the queued events (the queue is then empty), why the watch
// ended (nil while it runs) and a channel closed when either changes.
func (w *watcher) take() ([]*filesystem.FilesystemEvent, error, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.events
	w.events = nil
	return evs, w.end, w.ready
}

// close ends the watch for reason (the first reason given stays) and
// releases its inotify instance; the queued events can still be taken.
func (w *watcher) close(reason error) {
	w.mu.Lock()
	if w.end == nil {
		w.end = reason
		w.wake()
	}
	w.mu.Unlock()
	w.once.Do(func() {
		w.in.Close() // wakes the reader: its Read fails
		w.root.Close()
	})
}

// dropCount is how many events the watch dropped.
func (w *watcher) dropCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}
