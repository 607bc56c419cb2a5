package envcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// keyInput is everything an environment depends on; its JSON's SHA-256 is
// the environment key.
type keyInput struct {
	Format        int      `json:"format"`
	Base          string   `json:"base"`
	Python        string   `json:"python"`
	PythonVersion string   `json:"python_version"`
	Repo          string   `json:"repo"`
	Version       string   `json:"version"`
	EnvCommit     string   `json:"env_commit"`
	Packages      string   `json:"packages"`
	Requirements  []string `json:"requirements"`
	EnvYML        []string `json:"env_yml"`
	PipPackages   []string `json:"pip_packages"`
	PreInstall    []string `json:"pre_install"`
	Install       string   `json:"install"`
	NoUseEnv      bool     `json:"no_use_env"`
	SystemSite    bool     `json:"system_site_packages"`
	Wheelhouse    string   `json:"wheelhouse"` // digest of the wheel listing
}

func (c *Cache) envKey(inst dataset.Instance, sp spec.Spec, base baseInfo, py *Python) (string, error) {
	wh := ""
	if c.opts.Wheelhouse != "" {
		d, err := listingDigest(c.opts.Wheelhouse)
		if err != nil {
			return "", fmt.Errorf("wheelhouse: %w", err)
		}
		wh = d
	}
	in := keyInput{
		Format: FormatVersion, Base: base.keyStr, Python: py.Path, PythonVersion: py.Version,
		Repo: inst.Repo, Version: inst.Version, EnvCommit: spec.EnvironmentCommit(inst),
		Packages: sp.Packages, Requirements: sp.RequirementsPaths, EnvYML: sp.EnvYMLPaths, PipPackages: sp.PipPackages,
		PreInstall: sp.PreInstall, Install: sp.Install, NoUseEnv: sp.NoUseEnv, SystemSite: c.opts.SystemSitePackages, Wheelhouse: wh,
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
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
	python *Python
}

// envLayer returns the instance's environment layer, building it once.
func (c *Cache) envLayer(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, base baseInfo) (envResult, error) {
	py, err := c.python(ctx, sp.Python, base)
	if err != nil {
		return envResult{}, fmt.Errorf("environment of %s: %w", inst.InstanceID, err)
	}
	key, err := c.envKey(inst, sp, base, py)
	if err != nil {
		return envResult{}, err
	}
	res := envResult{key: key, python: py}
	ref := EnvRef(key)
	if id, err := c.store.Ref(ref); err == nil && c.store.Has(id) {
		res.layer = id
		return res, nil
	}
	if be := c.checkFailed(key); be != nil {
		return res, be
	}
	l, err := c.lock(ctx, "env-"+key, nil)
	if err != nil {
		return res, err
	}
	defer l.unlock()
	if id, err := c.store.Ref(ref); err == nil && c.store.Has(id) {
		res.layer = id
		return res, nil
	}
	if be := c.checkFailed(key); be != nil {
		return res, be
	}
	r.built = true
	c.envBuilds.Add(1)
	// The environment is built over the repository at its setup commit.
	envCommit := spec.EnvironmentCommit(inst)
	repoID, err := c.repoLayer(ctx, r, inst, envCommit)
	if err != nil {
		return res, err
	}
	res.layer, err = c.buildEnv(ctx, r, inst, sp, base, py, key, repoID)
	return res, err
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
	be.Recorded = true
	be.Log = c.path("logs", "env-"+key+".log") // the cache may have moved
	return be
}

// buildEnv runs the install steps in a build sandbox and commits its upper
// dir. Called with the key's lock held.
func (c *Cache) buildEnv(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, base baseInfo, py *Python, key string, repoID store.LayerID) (store.LayerID, error) {
	if c.opts.Runtime == nil {
		return store.LayerID{}, errors.New("building an environment needs a sandbox runtime")
	}
	dir := c.path("build", "env-"+key)
	removeAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "upper"), 0o755); err != nil {
		return store.LayerID{}, err
	}
	defer removeAll(dir)
	logPath := c.path("logs", "env-"+key+".log")
	var log strings.Builder
	fmt.Fprintf(&log, "# msb environment build %s for %s (%s), python %s (%s), started %s\n",
		key, inst.EnvironmentKey(), inst.InstanceID, py.Path, py.Version, time.Now().UTC().Format(time.RFC3339))

	fail := func(reason string, err error) (store.LayerID, error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			os.WriteFile(logPath, []byte(log.String()+"\n# interrupted: "+err.Error()+"\n"), 0o644)
			return store.LayerID{}, err
		}
		if err != nil {
			reason += ": " + err.Error()
		}
		c.failedBuilds.Add(1)
		fmt.Fprintf(&log, "\n# FAILED: %s\n", reason)
		os.WriteFile(logPath, []byte(log.String()), 0o644)
		be := &BuildError{Key: key, EnvKey: inst.EnvironmentKey(), Log: logPath, Tail: tail(log.String(), 20), Reason: firstLine(reason), At: time.Now().UTC()}
		if b, err := json.MarshalIndent(be, "", "  "); err == nil {
			writeAtomic(c.path("failed", key+".json"), b)
		}
		return store.LayerID{}, be
	}

	var stack []store.LayerID
	if !base.host {
		var err error
		if stack, err = c.store.Stack(base.layer); err != nil {
			return fail("reading the base layer", err)
		}
	}
	lease, err := c.store.Lease(ctx, append([]store.LayerID{repoID}, stack...)...)
	if err != nil {
		return fail("leasing the base and repository layers", err)
	}
	defer lease.Release()
	var layers []string
	for i := len(stack) - 1; i >= 0; i-- {
		layers = append(layers, c.store.TreePath(stack[i]))
	}
	layers = append(layers, c.store.TreePath(repoID))
	spec := sandbox.Config{
		Layers: layers, HostBase: base.host, UpperDir: filepath.Join(dir, "upper"), Network: sandbox.NetworkHost,
		Workdir: Testbed, Binds: py.binds(), Limits: c.opts.BuildLimits, MaxOutput: 4 << 20,
		Env: []string{"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_CACHE_DIR=/tmp/msb-pip-cache"},
	}
	if c.opts.Wheelhouse != "" {
		wh, err := filepath.Abs(c.opts.Wheelhouse)
		if err != nil {
			return fail("wheelhouse", err)
		}
		spec.Binds = append(spec.Binds, sandbox.Bind{Source: wh, Target: wheelMount, ReadOnly: true})
		spec.Env = append(spec.Env, "PIP_NO_INDEX=1", "PIP_FIND_LINKS="+wheelMount)
	}
	script, err := buildScript(sp, py, c.opts.SystemSitePackages)
	if err != nil {
		return fail("build script", err)
	}
	fmt.Fprintf(&log, "# script:\n%s\n# output:\n", script)

	var budget int64
	if b := c.opts.Budget; b != nil {
		budget = min(b.Limit(), 512<<20)
		if err := b.Acquire(ctx, budget); err != nil {
			return fail("waiting for I/O budget", err)
		}
	}
	var res session.Result
	err = r.phase(PhaseEnvBuild, func() error {
		sb, err := c.opts.Runtime.Create(ctx, spec)
		if err != nil {
			return fmt.Errorf("creating the build sandbox: %w", err)
		}
		if err := sb.WriteFile(ctx, "/tmp/msb-build.sh", []byte(script), 0o755); err != nil {
			sb.Close()
			return fmt.Errorf("writing the build script: %w", err)
		}
		res, err = sb.Exec(ctx, session.ExecRequest{Command: "bash /tmp/msb-build.sh", Timeout: c.opts.BuildTimeout})
		return errors.Join(err, sb.Close())
	})
	if c.opts.Budget != nil {
		c.opts.Budget.Release(budget)
	}
	log.WriteString(res.Output)
	if err != nil {
		return fail("running the build", err)
	}
	if res.TimedOut {
		return fail(fmt.Sprintf("timed out after %s", c.opts.BuildTimeout), nil)
	}
	if res.ExitCode != 0 {
		return fail(fmt.Sprintf("install steps exited with status %d", res.ExitCode), nil)
	}
	upper := filepath.Join(dir, "upper")
	if err := cleanUpper(upper); err != nil {
		return fail("cleaning the build's upper dir", err)
	}
	var id store.LayerID
	err = r.phase(PhaseCommit, func() error {
		id, err = c.store.CommitDir(ctx, upper, store.CommitOptions{Parents: stack[:min(len(stack), 1)], Ref: EnvRef(key), MapOwner: c.mapOwner()})
		return err
	})
	if err != nil {
		return fail("committing the environment", err)
	}
	fmt.Fprintf(&log, "\n# committed layer %s\n", id)
	os.WriteFile(logPath, []byte(log.String()), 0o644)
	return id, nil
}

// buildScript is the bash script a build sandbox runs: a venv at VenvPath,
// the spec's packages, pip packages, pre-install and install steps.
func buildScript(sp spec.Spec, py *Python, systemSite bool) (string, error) {
	var b strings.Builder
	b.WriteString("set -euxo pipefail\n")
	site := ""
	if systemSite {
		site = " --system-site-packages"
	}
	fmt.Fprintf(&b, "%s -m venv%s %s\n", spec.ShellQuote(py.Path), site, VenvPath)
	fmt.Fprintf(&b, "export VIRTUAL_ENV=%s PATH=%s/bin:$PATH\n", VenvPath, VenvPath)
	b.WriteString("cd " + Testbed + "\n")
	switch {
	case sp.Packages == "":
	case sp.Packages == "requirements.txt":
		for _, p := range sp.RequirementsPaths {
			fmt.Fprintf(&b, "python -m pip install -r %s\n", spec.ShellQuote(p))
		}
	case sp.Packages == "environment.yml":
		return "", fmt.Errorf("spec %s@%s wants a conda environment.yml (%s); conda environments are not supported, list pip packages instead",
			sp.Repo, sp.Version, strings.Join(sp.EnvYMLPaths, ", "))
	default:
		fmt.Fprintf(&b, "python -m pip install %s\n", sp.Packages)
	}
	if len(sp.PipPackages) > 0 {
		q := make([]string, len(sp.PipPackages))
		for i, p := range sp.PipPackages {
			q[i] = spec.ShellQuote(p)
		}
		fmt.Fprintf(&b, "python -m pip install %s\n", strings.Join(q, " "))
	}
	for _, s := range sp.PreInstall {
		b.WriteString(s + "\n")
	}
	if sp.Install != "" {
		b.WriteString(sp.Install + "\n")
	}
	return b.String(), nil
}

// cleanUpper removes from a build's upper dir what must not be in the
// environment layer: /testbed (the repository comes from its own layer),
// /tmp, caches, and the empty mount points the sandbox made.
func cleanUpper(upper string) error {
	for _, p := range []string{"testbed", "tmp", "root/.cache", strings.TrimPrefix(wheelMount, "/")} {
		if err := removeAll(filepath.Join(upper, p)); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(upper)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(upper, e.Name())
		if sub, err := os.ReadDir(p); err == nil && len(sub) == 0 {
			os.Remove(p)
		}
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
