package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox"
)

// Disk phases: what the bytes are.
const (
	PhaseTotal       = "total"        // everything below but the system: what each method keeps for the workload
	PhaseTotalSystem = "total+system" // total and the system the tasks see: like for like the other way
	PhaseLayers      = "layers"       // msb: the env layer and the N repository layers in the store
	PhaseMirror      = "mirror"       // msb: the repository's git mirror
	PhaseTarballs    = "tarballs"     // paper: the venv's and the N repositories' tarballs
	PhaseImages      = "images"       // podman: env and N instance images (the base image is its system)
	PhaseSystem      = "system"       // the base system the tasks see: podman's base image; msb's and the paper's host system dirs
	PhaseTasks       = "tasks"        // what the N live tasks made (msb: state dirs; paper: extracted dirs; podman: container layers)
)

// disk measures, for each N of DiskNs, the bytes each method keeps on disk
// while N tasks of N different instances exist: st_blocks, each inode
// once (the store's trees are hard links into its objects). The base
// system the tasks see is counted apart for every method alike (podman's
// base image; the host's system dirs msb and the paper bind), and each
// method gets two totals: without it (total) and with it (total+system).
// msb's tasks write to host upper dirs here (see
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
	var total, system int64
	add := func(phase string, v int64) {
		b.add(Sample{Key: Key{Measure: MeasureDisk, Workload: w.name, Method: m.name(), Phase: phase, Param: fmt.Sprintf("n=%d", n)},
			Round: -1, Value: float64(v), Unit: UnitBytes})
	}
	for _, p := range parts {
		v, err := b.partBytes(p)
		if err != nil {
			return err
		}
		if p.inTotal {
			total += v
		} else {
			system += v
		}
		add(p.phase, v)
	}
	add(PhaseTotal, total)
	add(PhaseTotalSystem, total+system)
	return nil
}

// part is one component of a method's disk use; the system is the one
// part left out of the total.
type part struct {
	phase   string
	dirs    []string
	inTotal bool
}

// partBytes is diskBytes of p's dirs, counted once per run for the
// system (the host's system dirs do not change during a run).
func (b *bencher) partBytes(p part) (int64, error) {
	if p.inTotal {
		return diskBytes(p.dirs...)
	}
	key := strings.Join(p.dirs, "\x00")
	if v, ok := b.systemBytes[key]; ok {
		return v, nil
	}
	v, err := diskBytes(p.dirs...)
	if err == nil {
		if b.systemBytes == nil {
			b.systemBytes = map[string]int64{}
		}
		b.systemBytes[key] = v
	}
	return v, err
}

// hostSystem is the base system msb's and the paper's tasks see: the
// host's system dirs they bind (sandbox.DefaultHostDirs).
var hostSystem = part{PhaseSystem, sandbox.DefaultHostDirs, false}

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
		return []part{{PhaseLayers, layers, true}, {PhaseMirror, []string{w.cache.MirrorPath(w.repo)}, true}, hostSystem}, nil
	case *paperMethod:
		return []part{{PhaseTarballs, w.paperTars[:1+n], true}, hostSystem}, nil
	case *podmanMethod:
		base, err := b.pm.imageDirs(ctx, podmanBase)
		if err != nil {
			return nil, err
		}
		all, err := b.pm.imageDirs(ctx, append([]string{w.podmanEnv}, w.images[:n]...)...)
		if err != nil {
			return nil, err
		}
		images := slices.DeleteFunc(all, func(d string) bool { return slices.Contains(base, d) }) // the images' lower layers hold the base's
		return []part{{PhaseImages, images, true}, {PhaseSystem, base, false}}, nil
	}
	return nil, fmt.Errorf("no disk accounting for method %s", m.name())
}
