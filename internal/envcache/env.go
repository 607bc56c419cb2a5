package envcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// envKeyInput is everything an environment depends on; its JSON's SHA-256
// is the environment key. The script holds the spec's dependency fields
// and the requirement files' contents, so two versions (or repositories)
// whose environments are built the same way share one.
type envKeyInput struct {
	Format        int    `json:"format"`
	Base          string `json:"base"`
	Python        string `json:"python"`
	PythonVersion string `json:"python_version"`
	Script        string `json:"script"`
	Wheelhouse    string `json:"wheelhouse"` // digest of the wheel listing
	IndexDate     string `json:"index_date,omitempty"`
}

func digestJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// listingDigest hashes the names and sizes of a directory's files.
func listingDigest(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\n", e.Name(), fi.Size())
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// EnvRef is the ref of an environment layer.
func EnvRef(key string) string { return "env/" + key }

type envResult struct {
	key    string
	layer  store.LayerID
	stack  []store.LayerID // the layer and its parents, topmost first
	python *Python
	// toolchains of a non-Python spec (python is nil then).
	toolchains []*Toolchain
}

// binds are what the environment's sandboxes bind read-only: the
// interpreter's prefix, or the toolchains outside the base.
func (e envResult) binds() []sandbox.Bind {
	return append(e.python.binds(), toolchainBinds(e.toolchains)...)
}

// taskEnv is the environment of a task or evaluation sandbox: for Python,
// PATH with the venv first, VIRTUAL_ENV, pip's index at the download cache
// and setuptools-scm's version; for the others, the toolchains and
// dependency caches (toolchainEnv), offline (offlineEnv).
func taskEnv(sp spec.Spec, env envResult, scmEnv []string) []string {
	if !sp.IsPython() {
		return append(toolchainEnv(env.toolchains), offlineEnv...)
	}
	return append([]string{"PATH=" + VenvPath + "/bin:" + systemPath, "VIRTUAL_ENV=" + VenvPath, "PIP_DISABLE_PIP_VERSION_CHECK=1"},
		append(fileIndexEnv(sp.IndexDate), scmEnv...)...)
}

// envLayer returns the instance's environment layer, building it once.
func (c *Cache) envLayer(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, base baseInfo) (envResult, error) {
	res, job, err := c.envJob(ctx, r, inst, sp, base)
	if err != nil {
		return res, err
	}
	res.layer, err = c.layerOnce(ctx, r, job, EnvRef(res.key), &c.envBuilds, job.stack[:min(len(job.stack), 1)])
	if err != nil {
		return res, err
	}
	res.stack, err = c.store.Stack(res.layer)
	return res, err
}

// envJob is the build of the instance's environment and its key (res has
// the key and the interpreter, not yet a layer), without building it.
func (c *Cache) envJob(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, base baseInfo) (envResult, buildJob, error) {
	if !sp.IsPython() {
		return c.toolchainJob(ctx, inst, sp, base)
	}
	py, err := c.python(ctx, sp.Python, base)
	if err != nil {
		return envResult{}, buildJob{}, fmt.Errorf("environment of %s: %w", inst.InstanceID, err)
	}
	res := envResult{python: py}
	reqs, err := c.requirements(ctx, r, inst, sp)
	if err != nil {
		return res, buildJob{}, err
	}
	script, err := envScript(sp, py, c.opts.SystemSitePackages, reqs)
	if err != nil {
		return res, buildJob{}, &BuildError{Kind: KindEnv, EnvKey: inst.EnvironmentKey(), Reason: err.Error()}
	}
	wh := ""
	if c.opts.Wheelhouse != "" {
		if wh, err = listingDigest(c.opts.Wheelhouse); err != nil {
			return res, buildJob{}, fmt.Errorf("wheelhouse: %w", err)
		}
	}
	res.key = digestJSON(envKeyInput{Format: FormatVersion, Base: base.keyStr, Python: py.Path, PythonVersion: py.Version, Script: script, Wheelhouse: wh, IndexDate: sp.IndexDate})
	job := buildJob{
		kind: KindEnv, key: res.key, envKey: inst.EnvironmentKey(), script: script, workdir: "/",
		header: fmt.Sprintf("msb environment build %s for %s (%s), python %s (%s)", res.key, inst.EnvironmentKey(), inst.InstanceID, py.Path, py.Version),
		base:   base, binds: py.binds(), indexDate: sp.IndexDate,
	}
	if !base.host {
		if job.stack, err = c.store.Stack(base.layer); err != nil {
			return res, job, fmt.Errorf("reading the base layer: %w", err)
		}
	}
	return res, job, nil
}

// layerOnce returns the layer under ref, building it with job (under the
// key's lock, at most once across processes) when it is missing; builds
// counts the builds this call starts.
func (c *Cache) layerOnce(ctx context.Context, r *run, job buildJob, ref string, builds *atomic.Int64, parents []store.LayerID) (store.LayerID, error) {
	have := func() (store.LayerID, bool) {
		id, err := c.store.Ref(ref)
		return id, err == nil && c.store.Has(id)
	}
	if id, ok := have(); ok {
		return id, nil
	}
	if be := c.checkFailed(job.key); be != nil {
		return store.LayerID{}, be
	}
	l, err := c.lock(ctx, job.kind+"-"+job.key, nil)
	if err != nil {
		return store.LayerID{}, err
	}
	defer l.unlock()
	if id, ok := have(); ok {
		return id, nil
	}
	if be := c.checkFailed(job.key); be != nil {
		return store.LayerID{}, be
	}
	r.built = true
	builds.Add(1)
	upper, cleanup, err := c.build(ctx, r, job)
	if err != nil {
		return store.LayerID{}, err
	}
	defer cleanup()
	if job.keep != nil {
		if err := job.keep(upper); err != nil {
			c.log.Warn("keeping what a build fetched", "kind", job.kind, "key", job.key, "err", err)
		}
	}
	return c.commitBuild(ctx, r, job, upper, ref, parents)
}

// checkFailed returns the recorded failure of key, or nil. With
// RetryFailed it clears the marker, once per key per Cache.
func (c *Cache) checkFailed(key string) *BuildError {
	be := c.readFailure(key)
	if be == nil {
		return nil
	}
	if c.opts.RetryFailed {
		c.mu.Lock()
		first := !c.retried[key]
		c.retried[key] = true
		c.mu.Unlock()
		if first {
			c.ClearFailed(key)
			return nil
		}
	}
	return be
}

func (c *Cache) readFailure(key string) *BuildError {
	b, err := os.ReadFile(c.path("failed", key+".json"))
	if err != nil {
		return nil
	}
	be := &BuildError{}
	if json.Unmarshal(b, be) != nil {
		return nil
	}
	if be.Kind == "" {
		be.Kind = KindEnv
	}
	be.Recorded = true
	be.Log = c.logPath(be.Kind, key) // the cache may have moved
	return be
}

// envScript is the bash script an environment build runs: a venv at
// VenvPath, the spec's bootstrap, packages (their pip stand-ins),
// requirements and pip packages, as the harness's environment image does
// with conda. The repository is not there: its install steps are the
// instance's (installScript).
func envScript(sp spec.Spec, py *Python, systemSite bool, reqs string) (string, error) {
	var b strings.Builder
	b.WriteString("set -euxo pipefail\n")
	site := ""
	if systemSite {
		site = " --system-site-packages"
	}
	fmt.Fprintf(&b, "%s -m venv%s %s\n", spec.ShellQuote(py.Path), site, VenvPath)
	fmt.Fprintf(&b, "export VIRTUAL_ENV=%s PATH=%s/bin:$PATH\n", VenvPath, VenvPath)
	pip := func(args []string) {
		if len(args) > 0 {
			q := make([]string, len(args))
			for i, a := range args {
				q[i] = spec.ShellQuote(a)
			}
			fmt.Fprintf(&b, "python -m pip install %s\n", strings.Join(q, " "))
		}
	}
	pip(sp.Bootstrap)
	switch {
	case sp.Packages == "":
	case sp.Packages == "requirements.txt":
		if reqs != "" {
			fmt.Fprintf(&b, "cat > /tmp/msb-requirements.txt <<'%s'\n%s\n%s\n", heredoc, reqs, heredoc)
			b.WriteString("python -m pip install -r /tmp/msb-requirements.txt\n")
		}
	case len(sp.PackagesPip) > 0:
		pip(sp.PackagesPip)
	case sp.Packages == "environment.yml":
		return "", fmt.Errorf("spec %s@%s wants a conda environment.yml (%s) and lists no pip stand-ins (packages_pip); there is no conda here",
			sp.Repo, sp.Version, strings.Join(sp.EnvYMLPaths, ", "))
	default: // a conda package list; its pip names are the same
		fmt.Fprintf(&b, "python -m pip install %s\n", sp.Packages)
	}
	pip(sp.PipPackages)
	return b.String(), nil
}

const heredoc = "EOF_MSB_REQUIREMENTS"
