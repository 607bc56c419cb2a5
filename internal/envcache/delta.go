package envcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/store"
)

// A repository layer is either whole (an anchor: the commit's tree and
// .git, no parents) or a delta over the nearest anchor of the same
// repository: only what differs from it, with whiteouts for what the commit
// no longer has, stacked above it. Each layer has its own directories (4 KiB
// each on ext4, 440-700 in a real repository's layer, 263 of them git's
// object fan-out), which the store cannot share between layers; a delta has
// only the directories on the way to its changes, and of git's fan-out
// only those its new blobs are in. The anchor's loose objects the commit
// does not reach are whited out: the anchor may be a later commit, and its
// objects (a fix's files, the commit itself) must not be readable in a task
// of an earlier one (docs/integrity.md, clean history).

// maxDeltaShare is the share of a commit's files that may differ from an
// anchor for the commit to be stored as a delta over it; further away, the
// commit becomes an anchor itself.
const maxDeltaShare = 0.5

// anchor is a whole repository layer.
type anchor struct {
	id     store.LayerID
	commit string
}

// nearestAnchor is the anchor of repo that differs from commit in the
// fewest files, if it differs in at most maxDeltaShare of them.
func (c *Cache) nearestAnchor(ctx context.Context, mirror, repo, commit string) (anchor, bool, error) {
	refs, err := c.store.Refs()
	if err != nil {
		return anchor{}, false, err
	}
	var best anchor
	bestChanged := -1
	for _, r := range refs {
		at, ok := strings.CutPrefix(r.Name, repoRefPrefix(repo))
		at, current := strings.CutSuffix(at, repoFormat)
		if !ok || !current || at == commit || !c.store.Has(r.Layer) {
			continue
		}
		if stack, err := c.store.Stack(r.Layer); err != nil || len(stack) != 1 {
			continue // a delta itself, or unreadable: not an anchor
		}
		out, err := git(ctx, "", "--git-dir", mirror, "diff-tree", "-r", "--no-renames", "--name-only", "-z", at, commit)
		if err != nil {
			continue // the anchor's commit is not in the mirror (any more)
		}
		if n := strings.Count(out, "\x00"); bestChanged < 0 || n < bestChanged {
			best, bestChanged = anchor{id: r.Layer, commit: at}, n
		}
	}
	if bestChanged < 0 {
		return anchor{}, false, nil
	}
	out, err := git(ctx, "", "--git-dir", mirror, "ls-tree", "-r", "--name-only", "-z", commit)
	if err != nil {
		return anchor{}, false, err
	}
	files := strings.Count(out, "\x00")
	return best, float64(bestChanged) <= maxDeltaShare*float64(files), nil
}

// deltaParents makes the checkout at dir a delta over the nearest anchor
// of repo and returns the anchor as its parent; nil, with dir untouched,
// when commit is to be an anchor itself.
func (c *Cache) deltaParents(ctx context.Context, mirror, repo, commit, dir string) ([]store.LayerID, error) {
	a, ok, err := c.nearestAnchor(ctx, mirror, repo, commit)
	if err != nil || !ok {
		return nil, err
	}
	m, err := c.store.Manifest(a.id)
	if err != nil {
		return nil, err
	}
	if err := c.deltaOver(ctx, dir, m); err != nil {
		return nil, fmt.Errorf("%s@%s as a delta over %s: %w", repo, commit, a.commit, err)
	}
	return []store.LayerID{a.id}, nil
}

// deltaOver turns root, a repository layer's tree (testbed/ with a fresh
// checkout), into what stacked above the anchor gives that tree: files
// equal to the anchor's (content, mode, owner, time) are removed,
// directories left empty and equal to the anchor's too, and a whiteout
// marks each path of the anchor the commit does not have. Git objects the
// anchor has are removed, new trees and commits packed (packNewObjects).
func (c *Cache) deltaOver(ctx context.Context, root string, base *store.Manifest) error {
	d := delta{root: root, below: make(map[string]*store.Entry, len(base.Entries)), owner: OwnerAsRoot(), dirs: map[string]unix.Stat_t{}}
	for i := range base.Entries {
		d.below[base.Entries[i].Path] = &base.Entries[i]
	}
	d.objects = path.Join(Testbed[1:], ".git", "objects")
	if err := d.recordDirs(); err != nil {
		return err
	}
	if err := d.whiteouts(base); err != nil {
		return err
	}
	if err := d.packNewObjects(ctx); err != nil {
		return fmt.Errorf("packing the new git objects: %w", err)
	}
	if _, err := d.prune(ctx, "."); err != nil {
		return err
	}
	return d.restoreTimes()
}

// delta is the state of deltaOver.
type delta struct {
	root    string
	below   map[string]*store.Entry // the anchor's entries by path
	objects string                  // testbed/.git/objects, relative to root
	owner   func(uid, gid uint32) (uint32, uint32)
	dirs    map[string]unix.Stat_t // the checkout's directories as they were, by path
}

// recordDirs notes every directory's metadata before anything changes it.
func (d *delta) recordDirs() error {
	return filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		d.dirs[d.rel(p)] = st
		return nil
	})
}

func (d *delta) rel(p string) string {
	r, _ := filepath.Rel(d.root, p)
	return filepath.ToSlash(r)
}

// whiteouts marks each path of the anchor that the commit lacks, where its
// parent is one of the commit's directories (a whiteout of a directory
// hides all below it). That includes the anchor's git objects the commit
// does not reach: the fresh checkout holds exactly those it reaches, loose.
func (d *delta) whiteouts(base *store.Manifest) error {
	for _, e := range base.Entries {
		if _, ok := d.dirs[path.Dir(e.Path)]; e.Path == "." || !ok {
			continue
		}
		p := filepath.Join(d.root, e.Path)
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		// A whiteout, as overlayfs writes them; unprivileged users may too.
		if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("making whiteout %s: %w", p, err)
		}
	}
	return nil
}

// packNewObjects leaves the loose objects the anchor has to the anchor
// (they show through) and puts the new trees and commits, which no other
// commit shares, in one pack. New blobs stay loose: a changed file's blob
// is the same file in every delta that has the change, one inode in the
// store, where packs would each hold a copy.
func (d *delta) packNewObjects(ctx context.Context) error {
	objects := filepath.Join(d.root, d.objects)
	fan, err := filepath.Glob(filepath.Join(objects, "[0-9a-f][0-9a-f]"))
	if err != nil {
		return err
	}
	var remove []string
	var fresh strings.Builder
	for _, dir := range fan {
		if !isDir(dir) {
			continue // a whiteout of a fan-out directory the commit has no object in
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue // a whiteout of an anchor's object
			}
			p := filepath.Join(dir, e.Name())
			if d.below[d.rel(p)] != nil {
				remove = append(remove, p)
			} else {
				fresh.WriteString(filepath.Base(dir) + e.Name() + "\n")
			}
		}
	}
	gitDir := filepath.Dir(objects)
	out, err := gitIn(ctx, "", fresh.String(), "--git-dir", gitDir, "cat-file", "--batch-check=%(objecttype) %(objectname)")
	if err != nil {
		return err
	}
	var pack strings.Builder
	for line := range strings.Lines(out) {
		if typ, id, _ := strings.Cut(strings.TrimSpace(line), " "); typ != "blob" && len(id) > 2 {
			pack.WriteString(id + "\n")
			remove = append(remove, filepath.Join(objects, id[:2], id[2:]))
		}
	}
	if pack.Len() > 0 {
		// One thread: the same objects give the same pack, and so the same layer.
		_, err := gitIn(ctx, "", pack.String(), "--git-dir", gitDir, "pack-objects", "--quiet", "--threads=1", filepath.Join(objects, "pack", "pack"))
		if err != nil {
			return err
		}
	}
	for _, p := range remove {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}

// prune walks the directory rel depth first, removing what the anchor
// already has, and reports whether rel itself can go: nothing is left in
// it and the anchor has it alike.
func (d *delta) prune(ctx context.Context, rel string) (bool, error) {
	ents, err := os.ReadDir(filepath.Join(d.root, rel))
	if err != nil {
		return false, err
	}
	left := len(ents)
	for _, e := range ents {
		crel := path.Join(rel, e.Name())
		var gone bool
		if e.IsDir() {
			gone, err = d.prune(ctx, crel)
		} else {
			gone, err = d.sameAsBelow(ctx, crel)
		}
		if err != nil {
			return false, err
		}
		if gone {
			if err := os.Remove(filepath.Join(d.root, crel)); err != nil {
				return false, err
			}
			left--
		}
	}
	if left > 0 || rel == "." {
		return false, nil
	}
	st := d.dirs[rel]
	return d.equalMeta(rel, store.TypeDir, &st), nil
}

// sameAsBelow reports whether the file at rel is the anchor's, as it is.
func (d *delta) sameAsBelow(ctx context.Context, rel string) (bool, error) {
	p := filepath.Join(d.root, rel)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if !d.equalMeta(rel, store.TypeFile, &st) || d.below[rel].Size != st.Size {
			return false, nil
		}
		sum, _, err := store.HashFile(ctx, p)
		return err == nil && sum == d.below[rel].Digest, err
	case unix.S_IFLNK:
		if !d.equalMeta(rel, store.TypeSymlink, &st) {
			return false, nil
		}
		target, err := os.Readlink(p)
		return err == nil && target == d.below[rel].Target, err
	}
	return false, nil // whiteouts, and what a checkout does not make
}

// equalMeta reports whether the anchor has rel with typ and st's mode,
// owner and time (as the store records them).
func (d *delta) equalMeta(rel string, typ store.EntryType, st *unix.Stat_t) bool {
	b := d.below[rel]
	if b == nil || b.Type != typ || b.Mode != st.Mode&0o7777 || b.Mtime != max(st.Mtim.Nano(), 1) {
		return false
	}
	uid, gid := st.Uid, st.Gid
	if d.owner != nil {
		uid, gid = d.owner(uid, gid)
	}
	return b.UID == uid && b.GID == gid
}

// restoreTimes gives the directories that are left the times they had
// after the checkout, which removing and adding entries changed.
func (d *delta) restoreTimes() error {
	for rel, st := range d.dirs {
		ts := []unix.Timespec{st.Atim, st.Mtim}
		err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(d.root, rel), ts, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("setting times: %w", err)
		}
	}
	return nil
}
