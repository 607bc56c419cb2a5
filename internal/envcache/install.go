package envcache

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// InstallRef is the ref of an instance's install layer.
func InstallRef(key string) string { return "install/" + key }

// installKeyInput is what an install layer depends on: the environment it
// ran in, the commit it ran on, the repository layer that held that commit
// (made again, e.g. with a submodule it lacked, it gives a new key and so a
// new install layer, and no earlier failure stands) and the script.
type installKeyInput struct {
	Format    int    `json:"format"`
	EnvKey    string `json:"env_key"`
	Repo      string `json:"repo"`
	Commit    string `json:"commit"`
	RepoLayer string `json:"repo_layer"`
	Script    string `json:"script"`
	// SCMVersion is the setuptools-scm version pretended (scmVersion).
	SCMVersion string `json:"scm_version,omitempty"`
	IndexDate  string `json:"index_date,omitempty"`
}

// installCommitDate is the author and committer date of the commit that
// records what the install steps changed in tracked files, so the same
// changes give the same commit id.
const installCommitDate = "2000-01-01T00:00:00Z"

// installScript runs the spec's pre-install and install steps in /testbed
// with the venv active, as the harness's instance image does, then commits
// what they changed in tracked files (the harness's "git commit -am"), so
// that a task's `git diff` shows only the agent's changes. Nothing is
// committed, and HEAD stays the base commit, when tracked files are
// unchanged (or when the base has no git). "" when the spec has no steps.
// The commit runs no hook of the repository's (core.hooksPath=/dev/null):
// an install step may set one up (the npm package pre-commit writes
// .git/hooks/pre-commit, which lints the tree: old dayjs rows, whose lint
// fails here), and the hooks are the project's tooling for
// its developers, not part of its environment.
func installScript(sp spec.Spec) string {
	if len(sp.PreInstall) == 0 && sp.Install == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("set -euxo pipefail\n")
	if sp.IsPython() {
		fmt.Fprintf(&b, "export VIRTUAL_ENV=%s PATH=%s/bin:$PATH\n", VenvPath, VenvPath)
	} else {
		b.WriteString(specEnvLines(sp.Env)) // the dependency step's variables
	}
	b.WriteString("cd " + Testbed + "\n")
	for _, s := range sp.PreInstall {
		b.WriteString(s + "\n")
	}
	if sp.Install != "" {
		b.WriteString(sp.Install + "\n")
	}
	fmt.Fprintf(&b, "cd %s\nif command -v git >/dev/null && ! git diff --quiet HEAD --; then\n", Testbed)
	fmt.Fprintf(&b, "  GIT_AUTHOR_DATE=%[1]s GIT_COMMITTER_DATE=%[1]s git -c core.hooksPath=/dev/null -c user.name=msb -c user.email=msb@localhost commit -q -am 'msb: install steps'\nfi\n", installCommitDate)
	b.WriteString(excludeOutputs)
	return b.String()
}

// excludeOutputs lists in .git/info/exclude what the install steps left
// untracked and unignored in /testbed (a build directory, a test binary,
// generated sources), each anchored and with its glob characters escaped,
// so that a task's diff (untracked files included) starts empty and holds
// only what the agent changed. An untracked directory is one entry.
const excludeOutputs = `if command -v git >/dev/null && [ -d .git ]; then
  mkdir -p .git/info
  git ls-files -z --others --exclude-standard --directory | while IFS= read -r -d '' f; do
    case $f in *$'\n'*) continue ;; esac
    f=${f//\\/\\\\}; f=${f//\*/\\*}; f=${f//\?/\\?}; f=${f//\[/\\[}
    printf '/%s\n' "$f"
  done >> .git/info/exclude
fi
`

// installLayer returns the instance's install layer: what its pre-install
// and install steps wrote (under /testbed: version files, egg-info,
// extension modules built in place; and in the venv: the editable
// install's links), built once per instance in a build sandbox over the
// base, the environment and the repository at the base commit, and stored
// like every layer (identical outputs are one layer). ok is false when the
// spec has no install steps.
func (c *Cache) installLayer(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, base baseInfo, env envResult, repoStack []store.LayerID, scmEnv []string) (key string, id store.LayerID, ok bool, err error) {
	key, script := installKey(inst, sp, env.key, repoStack[0], scmEnv)
	if script == "" {
		return "", id, false, nil
	}
	// bottom first: base, environment, repository; the store's stacks are topmost first
	stack := append(slices.Clone(repoStack), env.stack...)
	job := buildJob{
		kind: KindInstall, key: key, envKey: inst.EnvironmentKey(), script: script, workdir: Testbed,
		header: fmt.Sprintf("msb install build %s for %s at %s, environment %s", key, inst.InstanceID, inst.BaseCommit, short(env.key)),
		base:   base, binds: env.binds(), stack: stack, env: scmEnv, indexDate: sp.IndexDate,
	}
	if !sp.IsPython() {
		c.dependencyStep(&job, env)
	}
	id, err = c.layerOnce(ctx, r, job, InstallRef(key), &c.installBuilds, nil)
	return key, id, err == nil, err
}

// installKey is the key of the instance's install layer and its script;
// both are "" when the spec has no install steps.
func installKey(inst dataset.Instance, sp spec.Spec, envKey string, repoLayer store.LayerID, scmEnv []string) (key, script string) {
	script = installScript(sp)
	if script == "" {
		return "", ""
	}
	return digestJSON(installKeyInput{Format: FormatVersion, EnvKey: envKey, Repo: inst.Repo, Commit: inst.BaseCommit,
		RepoLayer: repoLayer.String(), Script: script, SCMVersion: strings.Join(scmEnv, " "), IndexDate: sp.IndexDate}), script
}
