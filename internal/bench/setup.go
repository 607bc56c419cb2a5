package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/store"
)

// setupMSB builds (once; later runs find them in the work dir) the
// environment and the repository layers of the workload's instances in an
// msb cache of its own.
func (b *bencher) setupMSB(ctx context.Context, w *workload) error {
	c, err := b.openCache(filepath.Join(b.o.Work, "msb", w.name), w.offline)
	if err != nil {
		return err
	}
	w.cache = c
	w.repoLayers, w.repoStacks, w.repoTrees = nil, nil, nil
	for i, in := range w.insts {
		t0 := time.Now()
		p, err := c.Prepare(ctx, in, w.spec, nil)
		if err != nil {
			return fmt.Errorf("preparing %s: %w", in.InstanceID, err)
		}
		if !p.Reused {
			b.logf("msb: built %s in %s", in.InstanceID, time.Since(t0).Round(time.Millisecond))
		}
		p.Release()
		repo := len(p.RepoStack)
		if len(p.Layers) < repo+1 || p.InstallLayer != "" {
			return fmt.Errorf("preparing %s: %d layers, want the environment's and the repository's only (copy mode and install layers are not benchmarked)", in.InstanceID, len(p.Layers))
		}
		if i == 0 {
			w.envLayer, w.envTree = p.EnvLayer, p.Layers[len(p.Layers)-repo-1]
		}
		stack := p.Layers[len(p.Layers)-repo:]
		whole := stack[0]
		if repo > 1 {
			if whole, err = wholeTree(ctx, c.Store(), filepath.Join(b.o.Work, "msb", w.name+"-whole"), p.RepoStack); err != nil {
				return fmt.Errorf("preparing %s: %w", in.InstanceID, err)
			}
		}
		w.repoLayers = append(w.repoLayers, p.RepoLayer)
		w.repoStacks = append(w.repoStacks, stack)
		w.repoTrees = append(w.repoTrees, whole)
	}
	return nil
}

func (b *bencher) openCache(dir string, offline bool) (*envcache.Cache, error) {
	return envcache.Open(envcache.Options{Dir: dir, Runtime: b.rt, Pythons: map[string]string{"3": b.o.Python},
		SystemSitePackages: offline, BuildNetwork: !offline, Logger: b.o.Logger})
}

// setupPaper makes the paper's tarballs from msb's layers (the same venv
// and /testbed), named by layer digest so they are made once.
func (b *bencher) setupPaper(w *workload) error {
	dir := filepath.Join(b.o.Work, "paper", w.name)
	w.paperTars = nil
	add := func(digest, tree, member string) error {
		tgz := filepath.Join(dir, member[:strings.IndexByte(member+"/", '/')]+"-"+shortDigest(digest)+".tar.gz")
		w.paperTars = append(w.paperTars, tgz)
		if _, err := os.Stat(tgz); err == nil {
			return nil
		}
		return paperTarball(tgz, tree, member)
	}
	if err := add(w.envLayer, w.envTree, strings.TrimPrefix(envcache.VenvPath, "/")); err != nil {
		return err
	}
	for i := range w.insts {
		if err := add(w.repoLayers[i], w.repoTrees[i], "testbed"); err != nil {
			return err
		}
	}
	return nil
}

// wholeTree merges a repository's layer stack (ids, bottom first: a
// delta's anchor, then the delta) into one directory under dir (once), for
// the baselines that take the tree as one directory.
func wholeTree(ctx context.Context, st *store.Store, dir string, ids []string) (string, error) {
	dst := filepath.Join(dir, shortDigest(ids[len(ids)-1]))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	var layers []store.LayerID
	for _, s := range ids {
		id, err := store.ParseLayerID(s)
		if err != nil {
			return "", err
		}
		layers = append(layers, id)
	}
	tmp := dst + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if err := st.ApplyLayers(ctx, tmp, layers); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}

func shortDigest(d string) string {
	d = d[strings.IndexByte(d, ':')+1:]
	return d[:min(16, len(d))]
}

// setupPodmanBase imports the base image from a root filesystem: the one
// given, else one debootstrap makes in the work dir (once).
func (b *bencher) setupPodmanBase(ctx context.Context, pm *podman) error {
	rootfs := b.o.PodmanRootfs
	if rootfs == "" {
		rootfs = filepath.Join(b.o.Work, "rootfs")
		if _, err := os.Stat(filepath.Join(rootfs, "usr", "bin", "python3")); err != nil {
			t0 := time.Now()
			if err := debootstrap(ctx, rootfs); err != nil {
				return err
			}
			b.add(Sample{Key: Key{Measure: MeasurePrep, Workload: WorkloadBare, Method: MethodPodman, Phase: "base-rootfs"}, Round: -1,
				Value: time.Since(t0).Seconds(), Unit: UnitSeconds})
		}
	}
	if pm.imageLayer(ctx, podmanBase) == "rootfs:"+rootfs {
		return nil
	}
	t0 := time.Now()
	if err := pm.importBase(ctx, rootfs); err != nil {
		return err
	}
	b.add(Sample{Key: Key{Measure: MeasurePrep, Workload: WorkloadBare, Method: MethodPodman, Phase: "base-import"}, Round: -1,
		Value: time.Since(t0).Seconds(), Unit: UnitSeconds})
	return nil
}

// debootstrap makes a minimal Debian root filesystem with python3, venv
// and git: the SWE-bench-style base image's content. The suite is the
// host's own Debian release (so the venv built on the host runs in it),
// bookworm elsewhere.
func debootstrap(ctx context.Context, dir string) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("%w: podman's base image needs a root filesystem: apt-get install debootstrap, or give --podman-rootfs DIR (with python3 and git)", errSkipped)
	}
	suite := "bookworm"
	if rel, err := os.ReadFile("/etc/os-release"); err == nil && strings.Contains(string(rel), "ID=debian") {
		for _, l := range strings.Split(string(rel), "\n") {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok && v != "" {
				suite = v
			}
		}
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include=python3,python3-venv,git,ca-certificates", suite, tmp, debianMirror)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("debootstrap %s: %v: %s", suite, err, tail(string(out), 800))
	}
	os.RemoveAll(dir)
	return os.Rename(tmp, dir)
}

// debianMirror is where debootstrap downloads from.
const debianMirror = "http://deb.debian.org/debian"

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// setupPodman builds the workload's env image (base + the venv of msb's
// env layer) and instance images (env + each /testbed of msb's repo
// layers), each rebuilt only when its layer changed.
func (b *bencher) setupPodman(ctx context.Context, w *workload) error {
	if w.bare() {
		return nil
	}
	repo := "localhost/msb-bench/" + w.name
	w.podmanEnv = repo + ":env"
	if b.pm.imageLayer(ctx, w.podmanEnv) != w.envLayer {
		if err := b.pm.build(ctx, w.podmanEnv, w.envTree, envContainerfile(podmanBase), w.envLayer); err != nil {
			return err
		}
	}
	w.images = nil
	for i := range w.insts {
		im := fmt.Sprintf("%s:%d", repo, i)
		w.images = append(w.images, im)
		// the label must name the env image too: a rebuilt env image makes every instance image stale
		layer := w.repoLayers[i] + "+" + shortDigest(w.envLayer)
		if b.pm.imageLayer(ctx, im) == layer {
			continue
		}
		if err := b.pm.build(ctx, im, w.repoTrees[i], instanceContainerfile(w.podmanEnv), layer); err != nil {
			return err
		}
	}
	return nil
}
