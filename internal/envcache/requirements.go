package envcache

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
)

// renamedRequirements are packages removed from PyPI and what stands in
// for them, as the harness replaces them.
var renamedRequirements = []struct{ from, to string }{
	{"types-pkg_resources", "types-setuptools"},
}

// requirements returns the requirement file an environment installs when
// the spec's packages are "requirements.txt": the first of the spec's
// requirements paths present at the environment commit (fileAt: from the
// commit's record or the mirror), with what the harness leaves out left
// out (comments, "-e ." and ".[test" lines), the files it includes with
// "-r" (one level) first, and removed packages renamed. "" for other
// specs.
func (c *Cache) requirements(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec) (string, error) {
	if sp.Packages != "requirements.txt" {
		return "", nil
	}
	commit := spec.EnvironmentCommit(inst)
	for _, p := range sp.RequirementsPaths {
		text, ok, err := c.fileAt(ctx, r, inst, commit, p)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		var included, own []string
		for _, line := range strings.Split(text, "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-r"); ok {
				sub, ok, err := c.fileAt(ctx, r, inst, commit, path.Join(path.Dir(p), strings.TrimSpace(f)))
				if err != nil {
					return "", err
				}
				if ok {
					for _, l := range strings.Split(sub, "\n") {
						if !leftOut(l) {
							included = append(included, l)
						}
					}
				}
				continue
			}
			if !leftOut(line) {
				own = append(own, line)
			}
		}
		return renameRequirements(strings.Join(append(included, strings.Join(own, "\n")), "\n")), nil
	}
	return "", &BuildError{Kind: KindEnv, EnvKey: inst.EnvironmentKey(),
		Reason: fmt.Sprintf("no requirements file at %s in %s@%s", strings.Join(sp.RequirementsPaths, ", "), inst.Repo, short(commit))}
}

func leftOut(line string) bool {
	l := strings.TrimSpace(line)
	return strings.HasPrefix(l, "-e .") || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ".[test")
}

func renameRequirements(text string) string {
	for _, r := range renamedRequirements {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r.from) + `([<>=!~]=?.*|$)`)
		text = re.ReplaceAllString(text, r.to)
	}
	return text
}
