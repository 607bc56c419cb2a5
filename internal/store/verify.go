package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ProblemKind classifies what Verify found wrong.
type ProblemKind string

// Problem kinds.
const (
	CorruptObject   ProblemKind = "corrupt-object"   // content does not hash to its name
	CorruptInode    ProblemKind = "corrupt-inode"    // content or metadata differ from its name
	CorruptManifest ProblemKind = "corrupt-manifest" // does not hash to its name or does not decode
	MissingObject   ProblemKind = "missing-object"   // a layer's file has no object
	BadTree         ProblemKind = "bad-tree"         // a materialized file is not its inode
	StrayFile       ProblemKind = "stray-file"       // a file in the store that should not be there
)

// Problem is one thing wrong in the store.
type Problem struct {
	Kind   ProblemKind `json:"kind"`
	Path   string      `json:"path"`             // the file, relative to the store root
	Digest Digest      `json:"digest,omitzero"`  // the object concerned
	Layers []LayerID   `json:"layers,omitempty"` // every layer whose files use it
	Detail string      `json:"detail"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s (layers %v)", p.Kind, p.Path, p.Detail, p.Layers)
}

// Report is what Verify checked and found.
type Report struct {
	Objects  int       `json:"objects"`
	Inodes   int       `json:"inodes"`
	Layers   int       `json:"layers"`
	Bytes    int64     `json:"bytes_hashed"`
	Problems []Problem `json:"problems"`
}

// OK reports whether Verify found nothing wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verify re-hashes every object and inode (each inode once, even with many
// names; a compressed object decompressed), checks each inode's metadata against its name, each manifest
// against its digest, and that each materialized file is its inode. A
// damaged object is reported with every layer that uses it. The error is for
// failures to check, not for what the check found.
func (s *Store) Verify(ctx context.Context) (Report, error) {
	var r Report
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return r, err
	}
	defer unlock()

	// Which layers use which digest and inode.
	users := map[Digest][]LayerID{}
	manifests := map[LayerID]*Manifest{}
	manEnts, err := os.ReadDir(s.path("manifests"))
	if err != nil {
		return r, err
	}
	for _, e := range manEnts {
		rel := filepath.Join("manifests", e.Name())
		h, _ := strings.CutSuffix(e.Name(), manifestSuffix)
		d, err := parseHexDigest(h)
		if err != nil {
			r.Problems = append(r.Problems, Problem{Kind: StrayFile, Path: rel, Detail: "not a manifest name"})
			continue
		}
		id := LayerID(d)
		m, err := s.Manifest(id)
		if err != nil {
			r.Problems = append(r.Problems, Problem{Kind: CorruptManifest, Path: rel, Digest: d, Layers: []LayerID{id}, Detail: err.Error()})
			continue
		}
		r.Layers++
		manifests[id] = m
		seen := map[Digest]bool{}
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == TypeFile && !seen[e.Digest] {
				seen[e.Digest] = true
				users[e.Digest] = append(users[e.Digest], id)
			}
		}
	}
	layersOf := func(d Digest) []LayerID {
		ls := append([]LayerID(nil), users[d]...)
		sort.Slice(ls, func(i, j int) bool { return ls[i].String() < ls[j].String() })
		return ls
	}

	// Hash every object and inode; names sharing an inode are hashed once.
	type file struct {
		path, name string
		inode      bool
	}
	var files []file
	for _, dir := range []string{filepath.Join("objects", "sha256"), "inodes"} {
		err := s.eachFan(ctx, dir, func(p, name string) error {
			files = append(files, file{path: p, name: name, inode: dir == "inodes"})
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	// Compressed objects: decompressed and hashed.
	var cold []string
	if _, err := os.Lstat(s.path("objects", "zstd")); err == nil {
		err := s.eachFan(ctx, filepath.Join("objects", "zstd"), func(p, _ string) error {
			cold = append(cold, p)
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	var (
		mu     sync.Mutex // guards hashes, r
		hashes = map[[2]uint64]*hashOnce{}
	)
	err = parallel(ctx, s.workers, len(files), func(ctx context.Context, i int) error {
		f := files[i]
		rel, _ := filepath.Rel(s.root, f.path)
		var st unix.Stat_t
		if err := unix.Lstat(f.path, &st); err != nil {
			return fmt.Errorf("verify: stat %s: %w", f.path, err)
		}
		mu.Lock()
		ho := hashes[[2]uint64{st.Dev, st.Ino}]
		first := ho == nil
		if first {
			ho = &hashOnce{}
			hashes[[2]uint64{st.Dev, st.Ino}] = ho
		}
		mu.Unlock()
		ho.once.Do(func() { ho.sum, ho.n, ho.err = HashFile(ctx, f.path) })
		if ho.err != nil {
			return fmt.Errorf("verify: %w", ho.err)
		}
		mu.Lock()
		defer mu.Unlock()
		if first {
			r.Bytes += ho.n
		}
		if !f.inode {
			r.Objects++
			d, err := parseHexDigest(f.name)
			switch {
			case err != nil:
				r.Problems = append(r.Problems, Problem{Kind: StrayFile, Path: rel, Detail: "not an object name"})
			case ho.sum != d:
				r.Problems = append(r.Problems, Problem{Kind: CorruptObject, Path: rel, Digest: d, Layers: layersOf(d),
					Detail: fmt.Sprintf("content hashes to %s", ho.sum)})
			}
			return nil
		}
		r.Inodes++
		k, err := parseInodeName(f.name)
		switch {
		case err != nil:
			r.Problems = append(r.Problems, Problem{Kind: StrayFile, Path: rel, Detail: err.Error()})
		case ho.sum != k.digest:
			r.Problems = append(r.Problems, Problem{Kind: CorruptInode, Path: rel, Digest: k.digest, Layers: layersOf(k.digest),
				Detail: fmt.Sprintf("content hashes to %s", ho.sum)})
		case !metaMatches(&st, k):
			r.Problems = append(r.Problems, Problem{Kind: CorruptInode, Path: rel, Digest: k.digest, Layers: layersOf(k.digest),
				Detail: fmt.Sprintf("metadata is mode %#o uid %d gid %d", st.Mode&0o7777, st.Uid, st.Gid)})
		default:
			if ok, err := xattrsMatch(f.path, k); err != nil || !ok {
				r.Problems = append(r.Problems, Problem{Kind: CorruptInode, Path: rel, Digest: k.digest, Layers: layersOf(k.digest),
					Detail: fmt.Sprintf("extended attributes differ from its name (%v)", err)})
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}

	err = parallel(ctx, s.workers, len(cold), func(ctx context.Context, i int) error {
		p := cold[i]
		rel, _ := filepath.Rel(s.root, p)
		h, ok := strings.CutSuffix(filepath.Base(p), ".zst")
		d, err := parseHexDigest(h)
		if !ok || err != nil {
			mu.Lock()
			r.Problems = append(r.Problems, Problem{Kind: StrayFile, Path: rel, Detail: "not a compressed object name"})
			mu.Unlock()
			return nil
		}
		sum, n, herr := s.hashCompressed(ctx, d)
		mu.Lock()
		defer mu.Unlock()
		r.Objects++
		r.Bytes += n
		switch {
		case herr != nil && ctx.Err() != nil:
			return ctx.Err()
		case herr != nil:
			r.Problems = append(r.Problems, Problem{Kind: CorruptObject, Path: rel, Digest: d, Layers: layersOf(d), Detail: herr.Error()})
		case sum != d:
			r.Problems = append(r.Problems, Problem{Kind: CorruptObject, Path: rel, Digest: d, Layers: layersOf(d),
				Detail: fmt.Sprintf("content decompresses to %s", sum)})
		}
		return nil
	})
	if err != nil {
		return r, err
	}

	// Every file of every materialized layer is its object's inode.
	ids := make([]LayerID, 0, len(manifests))
	for id := range manifests {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		m := manifests[id]
		missing := map[Digest]bool{}
		for i := range m.Entries {
			e := &m.Entries[i]
			if e.Type != TypeFile {
				continue
			}
			if !missing[e.Digest] && !s.HasObject(e.Digest) {
				missing[e.Digest] = true
				r.Problems = append(r.Problems, Problem{Kind: MissingObject, Path: filepath.Join("objects", "sha256", e.Digest.Hex()[:2], e.Digest.Hex()),
					Digest: e.Digest, Layers: layersOf(e.Digest), Detail: "object is missing"})
			}
			if !s.materialized(id) {
				continue
			}
			if p := s.checkTreeFile(id, e, hashes); p != nil {
				r.Problems = append(r.Problems, *p)
			}
		}
	}
	return r, nil
}

type hashOnce struct {
	once sync.Once
	sum  Digest
	n    int64
	err  error
}

// HashFile returns the digest and size of the file at path, as the store
// names content.
func HashFile(ctx context.Context, path string) (Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digest{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := copyHashing(ctx, nopWriter{}, h, f)
	if err != nil {
		return Digest{}, n, fmt.Errorf("hashing %s: %w", path, err)
	}
	return Digest(h.Sum(nil)), n, nil
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

// checkTreeFile checks that a layer's file is a link to its inode, or (after
// a copy fallback) a file with the right content.
func (s *Store) checkTreeFile(id LayerID, e *Entry, hashes map[[2]uint64]*hashOnce) *Problem {
	tp := filepath.Join(s.TreePath(id), e.Path)
	rel, _ := filepath.Rel(s.root, tp)
	bad := func(detail string) *Problem {
		return &Problem{Kind: BadTree, Path: rel, Digest: e.Digest, Layers: []LayerID{id}, Detail: detail}
	}
	var tst, ist unix.Stat_t
	if err := unix.Lstat(tp, &tst); err != nil {
		return bad(err.Error())
	}
	k := s.keyOf(e)
	if unix.Lstat(s.inodePath(k), &ist) == nil && ist.Dev == tst.Dev && ist.Ino == tst.Ino {
		return nil
	}
	if tst.Mode&unix.S_IFMT != unix.S_IFREG || !metaMatches(&tst, k) {
		return bad("not a regular file with the manifest's metadata")
	}
	if ho := hashes[[2]uint64{tst.Dev, tst.Ino}]; ho != nil {
		if ho.sum != e.Digest {
			return bad("content differs from the manifest's digest")
		}
		return nil
	}
	sum, _, err := HashFile(context.Background(), tp)
	if err != nil || sum != e.Digest {
		return bad("copied file's content differs from the manifest's digest")
	}
	return nil
}
