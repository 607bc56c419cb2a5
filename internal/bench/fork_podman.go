package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// podman's side of the fork comparison: a snapshot is `podman commit
// --pause` of the parent container (its processes paused for the copy,
// as msb freezes its sandbox's), a fork that commit and then `podman run`
// of the image per child, one after another as msb's engine starts its
// children, and the first command `podman exec`. podman carries no shell
// state: its children answer in a new bash.

// podmanParent runs a container of the base image that wrote size bytes.
func (f *forker) podmanParent(ctx context.Context, size int64) (*podmanTask, error) {
	t, err := f.podmanRun(ctx, podmanBase)
	if err != nil {
		return nil, err
	}
	if err := t.run(ctx, writeScript("/bench/data", size)); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// podmanRun starts a container of image whose shell waits for commands.
func (f *forker) podmanRun(ctx context.Context, image string) (*podmanTask, error) {
	name := containerName()
	id, err := f.b.pm.out(ctx, "run", "--detach", "--interactive", "--network", "none", "--name", name, image, "bash")
	if err != nil {
		f.b.pm.out(context.Background(), "rm", "--force", "--time", "0", name)
		return nil, err
	}
	return &podmanTask{pm: f.b.pm, id: id}, nil
}

// commit commits the container as a new image and returns its name.
func (f *forker) commit(ctx context.Context, t *podmanTask) (string, error) {
	image := "localhost/" + f.name("commit")
	if _, err := f.b.pm.out(ctx, "commit", "--pause", "--quiet", t.id, image); err != nil {
		return "", err
	}
	return image, nil
}

func (f *forker) removeImage(image string) error {
	_, err := f.b.pm.out(context.Background(), "rmi", "--force", image)
	return err
}

func (f *forker) podmanSnapshotTrial(ctx context.Context, size int64, round, slot int) (err error) {
	p, err := f.podmanParent(ctx, size)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	t0 := time.Now()
	image, err := f.commit(ctx, p)
	d := time.Since(t0)
	if err != nil {
		return err
	}
	f.add(MethodPodman, PhaseSnapshot, "written="+fmtSize(size), round, slot, d.Seconds(), UnitSeconds)
	return f.removeImage(image)
}

func (f *forker) podmanForkTrial(ctx context.Context, n, round, slot int) (err error) {
	p, err := f.podmanParent(ctx, f.o.ForkBytes)
	if err != nil {
		return err
	}
	var kids []*podmanTask
	image := ""
	defer func() {
		for _, k := range kids {
			err = errors.Join(err, k.close())
		}
		err = errors.Join(err, p.close())
		if image != "" {
			err = errors.Join(err, f.removeImage(image))
		}
	}()
	t0 := time.Now()
	if image, err = f.commit(ctx, p); err != nil {
		return err
	}
	for range n {
		k, err := f.podmanRun(ctx, image)
		if err != nil {
			return err
		}
		kids = append(kids, k)
	}
	ds, err := answered(ctx, t0, n, func(ctx context.Context, i int) error {
		return kids[i].run(ctx, "test -d /bench/data")
	})
	if err != nil {
		return err
	}
	f.forkSamples(MethodPodman, ds, round, slot)
	if n == 1 {
		return nil
	}
	return f.podmanIdle(ctx, kids, f.forkParam(n), round, slot)
}

// podmanIdle records the PSS of each idle child (conmon and its bash) and
// the bytes in its writable layer.
func (f *forker) podmanIdle(ctx context.Context, kids []*podmanTask, param string, round, slot int) error {
	time.Sleep(f.o.Idle)
	for _, k := range kids {
		tree, _ := treePSS(k.pids())
		if tree == 0 {
			return fmt.Errorf("container %s: no processes found (conmon %v)", k.id, k.pids())
		}
		f.add(MethodPodman, PhaseForkPSS, param, round, slot, float64(tree), UnitBytes)
	}
	for _, k := range kids {
		upper, err := f.b.pm.out(ctx, "container", "inspect", "--format", "{{.GraphDriver.Data.UpperDir}}", k.id)
		if err != nil {
			return err
		}
		v, err := contentBytes(upper)
		if err != nil {
			return fmt.Errorf("container %s: %w", k.id, err)
		}
		f.add(MethodPodman, PhaseForkDisk, param, round, slot, float64(v), UnitBytes)
	}
	return nil
}

// contentBytes is the size of the regular files under dir, each inode
// once: what a snapshot of it would hold, as msb's SnapshotInfo.Bytes
// counts it.
func contentBytes(dir string) (int64, error) {
	var total int64
	err := walkInodes(context.Background(), []string{dir}, func(_ string, fi fs.FileInfo) error {
		if fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	return total, err
}
