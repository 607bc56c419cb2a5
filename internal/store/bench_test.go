package store

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree writes a tree shaped like a small virtualenv: ~2000 files in
// ~100 packages, sizes from empty to 64 KiB, some duplicated content.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	nodes := map[string]node{}
	for i := range 2000 {
		size := (i * 7919) % (64 << 10)
		if i%10 == 0 {
			size = 0 // __init__.py
		}
		content := fmt.Sprintf("# file %d\n", i%1700)
		for len(content) < size {
			content += content
		}
		nodes[fmt.Sprintf("lib/python3/site-packages/pkg%03d/mod%04d.py", i%100, i)] = node{content: content[:max(size, len(content)/2)]}
	}
	writeTree(b, dir, nodes)
	return dir
}

func BenchmarkCommitDir(b *testing.B) {
	src := benchTree(b)
	b.Run("new-store", func(b *testing.B) {
		base := b.TempDir()
		i := 0
		for b.Loop() {
			b.StopTimer()
			s, err := Open(filepath.Join(base, fmt.Sprint(i)))
			i++
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := s.CommitDir(b.Context(), src, CommitOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		s := newStore(b)
		if _, err := s.CommitDir(b.Context(), src, CommitOptions{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.CommitDir(b.Context(), src, CommitOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCommitSnapshot commits what a snapshot of a sandbox that wrote
// 8 MiB commits: 8 files of 1 MiB of new random data, then a one-file
// record layer over it with a ref; as two commits (two-commits, how
// snapshots were committed before 2026-12-05), and staged apart and
// published together (one-publish, how the engine commits them now). Run
// them alternately to compare them (-test.bench 'CommitSnapshot/two-commits',
// then 'CommitSnapshot/one-publish', repeated): -count repeats one first.
func BenchmarkCommitSnapshot(b *testing.B) {
	commit := map[string]func(s *Store, data string, record File, ref string) error{
		"two-commits": func(s *Store, data string, record File, ref string) error {
			id, err := s.CommitDir(b.Context(), data, CommitOptions{MapOwner: rootOwner})
			if err != nil {
				return err
			}
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, record.Name), record.Data, os.FileMode(record.Mode)); err != nil {
				return err
			}
			_, err = s.CommitDir(b.Context(), dir, CommitOptions{Parents: []LayerID{id}, Ref: ref, MapOwner: rootOwner})
			return err
		},
		"one-publish": func(s *Store, data string, record File, ref string) error {
			staged, err := s.StageDir(b.Context(), data, CommitOptions{MapOwner: rootOwner})
			if err != nil {
				return err
			}
			rec, err := s.StageFiles(b.Context(), []LayerID{staged.ID}, 0o700, record)
			if err != nil {
				staged.Discard()
				return err
			}
			return s.Publish(b.Context(), ref, staged, rec)
		},
	}
	for _, how := range []string{"two-commits", "one-publish"} {
		b.Run(how, func(b *testing.B) {
			s := newStore(b)
			buf := make([]byte, 1<<20)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				data := b.TempDir()
				for j := range 8 {
					rand.Read(buf)
					writeTree(b, data, map[string]node{fmt.Sprintf("bench/data/%d", j): {content: string(buf)}})
				}
				record := File{Name: "record.json", Mode: 0o644, Data: fmt.Appendf(nil, `{"n": %d}`, i)}
				b.StartTimer()
				if err := commit[how](s, data, record, fmt.Sprintf("snapshot/%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMaterialize(b *testing.B) {
	src := benchTree(b)
	s := newStore(b)
	id, err := s.CommitDir(b.Context(), src, CommitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(s.layerDir(id)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.Materialize(b.Context(), id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNeverCompacted is what a store that was never compacted pays
// for cold layers it cannot have, on a layer of 10,000 small files of
// distinct content (a source tree's): the thaw check of the layer's
// materialization (every object raw), HasObject of 10,000 objects the
// store lacks (a stage's new content), each under the store lock as
// their callers take it, and the whole materialization.
func BenchmarkNeverCompacted(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	nodes := make(map[string]node, n)
	for i := range n {
		nodes[fmt.Sprintf("src/pkg%03d/mod%05d.py", i%100, i)] = node{content: fmt.Sprintf("# module %d\nVALUE = %d\n", i, i*7919)}
	}
	writeTree(b, dir, nodes)
	s := newStore(b)
	id, err := s.CommitDir(b.Context(), dir, CommitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := s.Manifest(id)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("thaw", func(b *testing.B) {
		for b.Loop() {
			unlock, err := s.lock(b.Context(), false)
			if err != nil {
				b.Fatal(err)
			}
			k, err := s.thaw(b.Context(), m)
			unlock()
			if err != nil || k != 0 {
				b.Fatalf("thawed %d: %v", k, err)
			}
		}
	})
	b.Run("has-object-new", func(b *testing.B) {
		absent := make([]Digest, n)
		for i := range absent {
			rand.Read(absent[i][:])
		}
		for b.Loop() {
			unlock, err := s.lock(b.Context(), false)
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range absent {
				if s.HasObject(d) {
					b.Fatalf("the store has random object %s", d)
				}
			}
			unlock()
		}
	})
	b.Run("materialize", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if err := os.RemoveAll(s.layerDir(id)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := s.Materialize(b.Context(), id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
