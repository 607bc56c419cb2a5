package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestDedup: ten commits of a tree that differ in a few files cost about the
// changed bytes on disk (st_blocks), not ten trees.
func TestDedup(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	const files, fileSize = 400, 16 << 10 // 6.4 MB of distinct content
	content := func(i, version int) string {
		b := make([]byte, fileSize)
		r := rand.New(rand.NewPCG(uint64(i), uint64(version)))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		return string(b)
	}
	nodes := map[string]node{}
	for i := range files {
		nodes[fmt.Sprintf("pkg%d/f%03d.py", i%20, i)] = node{content: content(i, 0)}
	}
	writeTree(t, src, nodes)
	if _, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: "repo/x@0"}); err != nil {
		t.Fatal(err)
	}
	u1, err := s.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const changedPerCommit = 3
	for c := 1; c < 10; c++ {
		for k := range changedPerCommit {
			i := rng.IntN(files)
			os.WriteFile(filepath.Join(src, fmt.Sprintf("pkg%d/f%03d.py", i%20, i)), []byte(content(i, c*10+k)), 0o644)
		}
		if _, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: fmt.Sprintf("repo/x@%d", c)}); err != nil {
			t.Fatal(err)
		}
	}
	u10, err := s.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	perCommit := (u10.DiskBytes - u1.DiskBytes) / 9
	changed := int64(changedPerCommit * fileSize)
	// Each commit adds its changed files plus a tree of 21 directories, a
	// manifest and a ref: allow that overhead, far below a 6.4 MB copy.
	ref, _ := s.Ref("repo/x@9")
	mi, err := os.Stat(s.manifestPath(ref))
	if err != nil {
		t.Fatal(err)
	}
	overhead := int64(21*4096) + (mi.Size()+4095)/4096*4096 + 2*4096
	t.Logf("first commit %d bytes on disk; each further commit %d bytes (changed %d); logical %d, dedup ratio %.1f",
		u1.DiskBytes, perCommit, changed, u10.LogicalBytes, u10.DedupRatio)
	if perCommit < changed || perCommit > changed+overhead {
		t.Errorf("each commit costs %d bytes on disk, want about %d changed bytes (+%d overhead)", perCommit, changed, overhead)
	}
	if len(u10.Layers) != 10 || u10.DedupRatio < 5 {
		t.Errorf("%d layers, dedup ratio %.2f", len(u10.Layers), u10.DedupRatio)
	}
	for _, l := range u10.Layers {
		if l.LogicalBytes != files*fileSize || l.LastUse.IsZero() || len(l.Refs) != 1 {
			t.Errorf("layer %s: %+v", l.ID.Short(), l)
		}
		if l.UniqueBytes > changed+8192 {
			t.Errorf("layer %s holds %d unique bytes, more than its changes", l.ID.Short(), l.UniqueBytes)
		}
		if l.UniqueBytes > l.DiskBytes || l.DiskBytes < l.LogicalBytes {
			t.Errorf("layer %s: unique %d, disk %d, logical %d bytes", l.ID.Short(), l.UniqueBytes, l.DiskBytes, l.LogicalBytes)
		}
	}
	// Ten layers sharing almost every file: about ten times the tree bytes.
	if r := float64(u10.LayerDiskBytes) / float64(u10.TreeBytes); r < 8 || r > 10.01 {
		t.Errorf("layers' disk bytes %d over tree bytes %d = %.2f, want about 10", u10.LayerDiskBytes, u10.TreeBytes, r)
	}
}

// TestUsageOfTinyFiles: a layer of files smaller than a block still has
// unique bytes at most its disk bytes (the words of msb cache ls hold).
func TestUsageOfTinyFiles(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	nodes := map[string]node{}
	for i := range 50 {
		nodes[fmt.Sprintf("f%02d", i)] = node{content: fmt.Sprint(i)}
	}
	writeTree(t, src, nodes)
	if _, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: "repo/tiny@0"}); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l := u.Layers[0]
	if l.UniqueBytes > l.DiskBytes || l.DiskBytes != u.TreeBytes || u.LayerDiskBytes != u.TreeBytes {
		t.Fatalf("layer unique %d, disk %d; store trees %d, layers %d", l.UniqueBytes, l.DiskBytes, u.TreeBytes, u.LayerDiskBytes)
	}
}
