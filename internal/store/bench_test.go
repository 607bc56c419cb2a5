package store

import (
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
