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
	"github.com/minisandbox/msb/internal/sandbox"
)

// Preparation phases.
const (
	PhaseEnv      = "env"      // the first instance: mirror, environment, repository
	PhaseInstance = "instance" // each further instance of a prepared environment
)

// preparer prepares instance i from nothing but the repository's source,
// one method's way.
type preparer struct {
	method  string
	prepare func(ctx context.Context, i int) error
	cleanup func()
}

// buildTimeout bounds one environment build of the preparation measure.
const buildTimeout = 30 * time.Minute

// prep times first-time preparation in fresh directories: instance 0 (at
// the environment's commit) also builds the environment (mirror clone,
// venv with the workload's install steps, from PyPI for the real
// workload); each further instance only its repository, checked out from
// the method's mirror. msb: Prepare into a new cache.
// The paper: a mirror clone, the install steps run in its chroot shell,
// then tar czf of the venv and of each /testbed. podman: a mirror clone,
// an env image built FROM the base image with the same install steps, an
// instance image per /testbed. Methods take turns per instance.
func (b *bencher) prep(ctx context.Context, w *workload) {
	n := min(b.o.PrepInstances, len(w.insts))
	dir := filepath.Join(b.o.Work, "prep", w.name)
	sandbox.RemoveAll(dir)
	defer sandbox.RemoveAll(dir)
	ps := []preparer{b.msbPreparer(w, filepath.Join(dir, "msb")), b.paperPreparer(w, filepath.Join(dir, "paper"))}
	if b.pm != nil {
		ps = append(ps, b.podmanPreparer(w, filepath.Join(dir, "podman")))
	}
	by := map[string]preparer{}
	var names []string
	for _, p := range ps {
		if !b.uses(p.method) {
			continue
		}
		by[p.method], names = p, append(names, p.method)
		defer p.cleanup()
	}
	failed := interleave(ctx, n, 0, names, func(ctx context.Context, i, slot int, name string) error {
		t0 := time.Now()
		if err := by[name].prepare(ctx, i); err != nil {
			return err
		}
		phase := PhaseInstance
		if i == 0 {
			phase = PhaseEnv
		}
		b.add(Sample{Key: Key{Measure: MeasurePrep, Workload: w.name, Method: name, Phase: phase},
			Round: i, Slot: slot, Value: time.Since(t0).Seconds(), Unit: UnitSeconds})
		return nil
	})
	b.failures(MeasurePrep, w, failed)
}

func (b *bencher) msbPreparer(w *workload, dir string) preparer {
	var c *envcache.Cache
	return preparer{method: MethodMSB, cleanup: func() {},
		prepare: func(ctx context.Context, i int) error {
			if c == nil {
				var err error
				if c, err = b.openCache(dir, w.offline); err != nil {
					return err
				}
			}
			p, err := c.Prepare(ctx, w.instance(i), w.spec, nil)
			if err != nil {
				return err
			}
			return p.Release()
		}}
}

// mirrorClone is the baselines' own copy of the repository.
func mirrorClone(ctx context.Context, src, dst string) error {
	return gitRun(ctx, "clone", "--quiet", "--mirror", src, dst)
}

// checkoutTree writes commit's tree with a small .git into dir, the
// steps msb's checkout takes: init, a depth-1 fetch from the mirror,
// checkout.
func checkoutTree(ctx context.Context, mirror, commit, dir string) error {
	for _, args := range [][]string{
		{"init", "--quiet", dir},
		{"-C", dir, "fetch", "--quiet", "--no-tags", "--depth", "1", "file://" + mirror, commit},
		{"-C", dir, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit},
	} {
		if err := gitRun(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func gitRun(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "git", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, tail(string(out), 400))
	}
	return nil
}

func (b *bencher) paperPreparer(w *workload, dir string) preparer {
	mirror := filepath.Join(dir, "mirror.git")
	m := &paperMethod{wl: w, rootless: b.rt.Rootless()}
	return preparer{method: MethodPaper, cleanup: func() {},
		prepare: func(ctx context.Context, i int) error {
			task := filepath.Join(dir, fmt.Sprintf("task-%d", i))
			defer os.RemoveAll(task)
			in := w.instance(i)
			if i == 0 {
				if err := mirrorClone(ctx, w.source, mirror); err != nil {
					return err
				}
			}
			if err := checkoutTree(ctx, mirror, in.BaseCommit, filepath.Join(task, "testbed")); err != nil {
				return err
			}
			if err := paperTarball(filepath.Join(dir, fmt.Sprintf("testbed-%d.tar.gz", i)), task, "testbed"); err != nil {
				return err
			}
			if i > 0 {
				return nil
			}
			// instance 0 is at the environment's commit: its /testbed is the one the install steps run in
			if err := m.build(ctx, task, w.install); err != nil {
				return err
			}
			return paperTarball(filepath.Join(dir, "venv.tar.gz"), task, strings.TrimPrefix(envcache.VenvPath, "/"))
		}}
}

// build runs an install script in the paper's chroot shell over task (the
// host's network, as the paper builds).
func (m *paperMethod) build(ctx context.Context, task, script string) error {
	if err := os.MkdirAll(filepath.Join(task, "tmp"), 0o1777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(task, "tmp", "msb-install.sh"), []byte(script), 0o755); err != nil {
		return err
	}
	cmd, err := m.shellCommand(task, paperShell)
	if err != nil {
		return err
	}
	sh, err := startPipeShell(cmd)
	if err != nil {
		return err
	}
	sh.timeout = buildTimeout
	err = sh.run(ctx, "PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 bash /tmp/msb-install.sh")
	if cerr := sh.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("install steps in the paper's chroot: %w", err)
	}
	return nil
}

// podmanEnvBuild builds the environment in a RUN step FROM the base image,
// the way SWE-bench's env images run their setup script: a copy of the
// checkout at /testbed (a bind mount would take the install's writes back
// into the build context, and the instance image copies that), the install
// steps, the copy removed in the same step so no layer holds it.
func podmanEnvBuild(from string) string {
	return fmt.Sprintf("FROM %s\nRUN --mount=type=bind,source=.,target=/msb-build cp -a /msb-build/testbed %s && "+
		"PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 bash /msb-build/msb-install.sh && rm -rf %s\n"+
		"ENV PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin VIRTUAL_ENV=%s\nWORKDIR %s\n",
		from, envcache.Testbed, envcache.Testbed, envcache.VenvPath, envcache.VenvPath, envcache.Testbed)
}

// hostNetworkConfig are the podman build flags that give an env build what
// msb's build sandbox and the paper's chroot get from the host's /etc: the
// host's network, its TLS trust store (a host behind a TLS-inspecting proxy
// trusts the proxy's CA there) and its pip configuration.
func hostNetworkConfig() []string {
	flags := []string{"--network", "host"}
	for _, p := range []string{"/etc/ssl/certs", "/etc/pip.conf"} {
		if _, err := os.Stat(p); err == nil {
			flags = append(flags, "--volume", p+":"+p+":ro")
		}
	}
	return flags
}

func (b *bencher) podmanPreparer(w *workload, dir string) preparer {
	mirror := filepath.Join(dir, "mirror.git")
	repo := "localhost/msb-bench/prep-" + w.name
	var built []string
	return preparer{method: MethodPodman,
		cleanup: func() {
			if len(built) > 0 {
				if _, err := b.pm.out(context.Background(), append([]string{"rmi", "--force"}, built...)...); err != nil {
					b.note(noteFailed, "removing the preparation's images: %v", err)
				}
			}
		},
		prepare: func(ctx context.Context, i int) error {
			bctx := filepath.Join(dir, fmt.Sprintf("ctx-%d", i))
			defer os.RemoveAll(bctx)
			in := w.instance(i)
			if i == 0 {
				if err := mirrorClone(ctx, w.source, mirror); err != nil {
					return err
				}
			}
			if err := checkoutTree(ctx, mirror, in.BaseCommit, filepath.Join(bctx, "testbed")); err != nil {
				return err
			}
			if i == 0 { // at the environment's commit: build the env image over this /testbed
				if err := os.WriteFile(filepath.Join(bctx, "msb-install.sh"), []byte(w.install), 0o755); err != nil {
					return err
				}
				built = append(built, repo+":env")
				if err := b.pm.build(ctx, repo+":env", bctx, podmanEnvBuild(podmanBase), "prep", hostNetworkConfig()...); err != nil {
					return err
				}
			}
			im := fmt.Sprintf("%s:%d", repo, i)
			built = append(built, im)
			return b.pm.build(ctx, im, bctx, instanceContainerfile(repo+":env"), "prep")
		}}
}
