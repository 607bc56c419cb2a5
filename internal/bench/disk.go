package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

// Disk phases: what the bytes are.
const (
	PhaseTotal    = "total"
	PhaseLayers   = "layers"   // msb: the env layer and the N repository layers in the store
	PhaseMirror   = "mirror"   // msb: the repository's git mirror
	PhaseTarballs = "tarballs" // paper: the venv's and the N repositories' tarballs
	PhaseImages   = "images"   // podman: base, env and N instance images
	PhaseBase     = "base"     // podman: the base image alone (included in images)
	PhaseTasks    = "tasks"    // what the N live tasks made (msb: state dirs; paper: extracted dirs; podman: container layers)
)

// disk measures, for each N of DiskNs, the bytes each method keeps on disk
// while N tasks of N different instances exist: st_blocks, each inode
// once (the store's trees are hard links into its objects). msb's and the
// paper's system dirs are the host's and cost nothing; podman's base image
// is counted. msb's tasks write to host upper dirs here (see
// msbMethod.uppers), so their bytes can be counted like the others'.
func (b *bencher) disk(ctx context.Context, w *workload) {
	for _, n := range b.o.DiskNs {
		if n > len(w.insts) {
			b.note(noteSkipped, "disk %s n=%d: only %d instances", w.name, n, len(w.insts))
			continue
		}
		for _, m := range b.methods(w, false) {
			if mm, ok := m.(*msbMethod); ok {
				mm.uppers = b.tasksDir()
			}
			if err := b.diskOf(ctx, w, m, n); err != nil {
				b.note(noteFailed, "disk %s n=%d %s: %v", w.name, n, m.name(), err)
			}
		}
	}
}

func (b *bencher) diskOf(ctx context.Context, w *workload, m method, n int) (err error) {
	var tasks []liveTask
	defer func() {
		for _, t := range tasks {
			err = errors.Join(err, t.close())
		}
	}()
	var taskDirs []string
	for i := range n {
		t, err := m.create(ctx, i)
		if err != nil {
			return fmt.Errorf("task %d: %w", i, err)
		}
		tasks = append(tasks, t)
		for _, c := range []string{w.answer, w.task} {
			if err := t.run(ctx, c); err != nil {
				return fmt.Errorf("task %d: %w", i, err)
			}
		}
		d, err := t.dirs(ctx)
		if err != nil {
			return err
		}
		taskDirs = append(taskDirs, d...)
	}
	parts, err := b.stored(ctx, w, m, n)
	if err != nil {
		return err
	}
	parts = append(parts, part{PhaseTasks, taskDirs, true})
	var total int64
	for _, p := range parts {
		v, err := diskBytes(p.dirs...)
		if err != nil {
			return err
		}
		if p.inTotal {
			total += v
		}
		b.add(Sample{Key: Key{Measure: MeasureDisk, Workload: w.name, Method: m.name(), Phase: p.phase, Param: fmt.Sprintf("n=%d", n)},
			Round: -1, Value: float64(v), Unit: UnitBytes})
	}
	b.add(Sample{Key: Key{Measure: MeasureDisk, Workload: w.name, Method: m.name(), Phase: PhaseTotal, Param: fmt.Sprintf("n=%d", n)},
		Round: -1, Value: float64(total), Unit: UnitBytes})
	return nil
}

// part is one component of a method's disk use.
type part struct {
	phase   string
	dirs    []string
	inTotal bool
}

// stored is what method m keeps for n instances besides its live tasks.
func (b *bencher) stored(ctx context.Context, w *workload, m method, n int) ([]part, error) {
	switch m.(type) {
	case *msbMethod:
		layers := []string{filepath.Dir(w.envTree)}
		for i := range n {
			for _, tree := range w.repoStacks[i] {
				if !slices.Contains(layers, filepath.Dir(tree)) { // a delta's anchor is another instance's layer
					layers = append(layers, filepath.Dir(tree))
				}
			}
		}
		return []part{{PhaseLayers, layers, true}, {PhaseMirror, []string{w.cache.MirrorPath(w.repo)}, true}}, nil
	case *paperMethod:
		return []part{{PhaseTarballs, w.paperTars[:1+n], true}}, nil
	case *podmanMethod:
		images, err := b.pm.imageDirs(ctx, append([]string{podmanBase, w.podmanEnv}, w.images[:n]...)...)
		if err != nil {
			return nil, err
		}
		base, err := b.pm.imageDirs(ctx, podmanBase)
		if err != nil {
			return nil, err
		}
		return []part{{PhaseImages, images, true}, {PhaseBase, base, false}}, nil
	}
	return nil, fmt.Errorf("no disk accounting for method %s", m.name())
}
