package envcache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/spec"
)

// DepsDir holds the dependency caches of a non-Python environment, at the
// same paths in build, task and evaluation sandboxes: the install layer's
// dependency step (cargo fetch, go mod download, mvn dependency:go-offline,
// npm ci) fills them, and the tests read them offline.
const DepsDir = "/opt/msb/deps"

// goCache is Go's build cache (GOCACHE) in DepsDir.
const goCache = DepsDir + "/go/cache"

// depsEnv points each tool's cache into DepsDir. Maven reads
// maven.repo.local from MAVEN_OPTS in every version (MAVEN_ARGS only from
// 3.9 on).
var depsEnv = []string{
	"CARGO_HOME=" + DepsDir + "/cargo",
	"GOPATH=" + DepsDir + "/go",
	"GOMODCACHE=" + DepsDir + "/go/pkg/mod",
	"GOCACHE=" + goCache,
	"GOTOOLCHAIN=local",
	"MAVEN_OPTS=-Dmaven.repo.local=" + DepsDir + "/m2",
	"npm_config_cache=" + DepsDir + "/npm",
}

// offlineEnv are the switches that make the tools work from DepsDir
// without the network: task and evaluation sandboxes have none. Maven's
// offline flag (-o) has no variable before 3.9: a spec's test command
// carries it.
var offlineEnv = []string{
	"CARGO_NET_OFFLINE=true",
	"GOPROXY=off",
	"GOFLAGS=-mod=mod",
	"npm_config_offline=true",
}

// networkSwitches are the entries of offlineEnv that forbid the network;
// GOFLAGS=-mod=mod only lets go.mod be updated and stays.
var networkSwitches = []string{"CARGO_NET_OFFLINE=true", "GOPROXY=off", "npm_config_offline=true"}

// OnlineEnv is env without the switches that keep the tools offline: the
// environment of a sandbox that has the network (validate's recheck of a
// gold patch that adds a dependency, an agent given the host's network),
// where cargo, Go and npm may fetch what the dependency store lacks.
func OnlineEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(e string) bool { return slices.Contains(networkSwitches, e) })
}

// toolchainKeyInput is what a non-Python environment depends on besides
// the base: the toolchains (name, version, where the sandbox sees them)
// and the Debian packages the spec needs.
type toolchainKeyInput struct {
	Format         int      `json:"format"`
	Base           string   `json:"base"`
	Language       string   `json:"language"`
	Toolchains     []string `json:"toolchains"`
	SystemPackages []string `json:"system_packages,omitempty"`
	Script         string   `json:"script"`
}

// toolchainKey is the environment key of a non-Python spec.
func toolchainKey(sp spec.Spec, tcs []*Toolchain, base baseInfo, script string) string {
	names := make([]string, len(tcs))
	for i, tc := range tcs {
		names[i] = fmt.Sprintf("%s=%s@%s", tc.Name, tc.Version, tc.Path)
	}
	pkgs := slices.Sorted(slices.Values(sp.SystemPackages))
	return digestJSON(toolchainKeyInput{Format: FormatVersion, Base: base.keyStr, Language: sp.Language, Toolchains: names, SystemPackages: pkgs, Script: script})
}

// toolchainScript is the environment build of a non-Python spec: the
// dependency dirs, and each toolchain's version in the log. The
// environment is the toolchains themselves, bound or in the base.
func toolchainScript(tcs []*Toolchain) string {
	var b strings.Builder
	b.WriteString("set -euxo pipefail\n")
	fmt.Fprintf(&b, "mkdir -p %[1]s/cargo %[1]s/go %[1]s/m2 %[1]s/npm\n", DepsDir)
	for _, tc := range tcs {
		fmt.Fprintf(&b, "# %s %s at %s\n", tc.Name, tc.Version, tc.Path)
	}
	return b.String()
}

// specEnvLines exports the spec's env for a build script, sorted by name.
func specEnvLines(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "export %s=%s\n", k, spec.ShellQuote(env[k]))
	}
	return b.String()
}

// toolchainJob is the environment build of a non-Python spec and its key
// (res has the key and the toolchains), without building it.
func (c *Cache) toolchainJob(ctx context.Context, inst dataset.Instance, sp spec.Spec, base baseInfo) (envResult, buildJob, error) {
	tcs, err := c.toolchains(ctx, sp, base)
	if err != nil {
		return envResult{}, buildJob{}, fmt.Errorf("environment of %s: %w", inst.InstanceID, err)
	}
	script := toolchainScript(tcs)
	res := envResult{key: toolchainKey(sp, tcs, base, script), toolchains: tcs}
	job := buildJob{
		kind: KindEnv, key: res.key, envKey: inst.EnvironmentKey(), script: script, workdir: "/",
		header: fmt.Sprintf("msb environment build %s for %s (%s), %s toolchains %s", res.key, inst.EnvironmentKey(), inst.InstanceID, sp.Language, strings.Join(sp.Toolchains, " ")),
		base:   base, binds: res.binds(), env: toolchainEnv(tcs),
	}
	if !base.host {
		if job.stack, err = c.store.Stack(base.layer); err != nil {
			return res, job, fmt.Errorf("reading the base layer: %w", err)
		}
	}
	return res, job, nil
}

// scmEnvFor is setuptools-scm's version for a Python spec's install
// (scmEnv); other languages have none.
func (c *Cache) scmEnvFor(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec) ([]string, error) {
	if !sp.IsPython() {
		return nil, nil
	}
	return c.scmEnv(ctx, r, inst)
}

// dependencyStep makes job, the install build of a non-Python spec, its
// dependency step: the toolchains and dependency caches; with the build
// network, the host's, npm, go, cargo and Maven through the registry
// proxy (registries.go, its setup script first) and what cargo and Maven
// fetched kept in the dependency store too; without, offline, from the
// download cache (seedScript). The key stays the script's without the
// setup or the seed: an offline rebuild is the same layer.
func (c *Cache) dependencyStep(job *buildJob, env envResult) {
	job.env, job.hostNetwork = toolchainEnv(env.toolchains), c.opts.BuildNetwork
	if job.hostNetwork {
		job.keep, job.registries = c.keepDeps, true
		job.script = strings.Replace(job.script, "set -euxo pipefail\n", "set -euxo pipefail\n"+regproxy.SetupScript(), 1)
		return
	}
	job.env = append(job.env, offlineBuildEnv()...)
	job.script = strings.Replace(job.script, "set -euxo pipefail\n", "set -euxo pipefail\n"+seedScript(), 1)
}
