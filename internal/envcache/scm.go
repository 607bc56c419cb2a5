package envcache

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/dataset"
)

// scmEnv is the variable that gives setuptools-scm the instance's version
// (none when no tag comes before its commit): scmVersionAt, from the
// commit's record (held in memory after the first read), else from the
// mirror.
func (c *Cache) scmEnv(ctx context.Context, r *run, inst dataset.Instance) ([]string, error) {
	v, err := c.scmVersionAt(ctx, r, inst)
	if err != nil || v == "" {
		return nil, err
	}
	return []string{scmVersionEnv(inst.Repo, v)}, nil
}

// scmVersion is the version setuptools-scm gives commit in a full clone
// (its default scheme: the last tag if the commit is tagged, else the next
// release as a .devN with the distance, and +g<node>), from `git describe`
// in the mirror; "" when no tag is found. A repository layer's clone is
// shallow and has no tags, where setuptools-scm would say 0.1.dev1.
func scmVersion(ctx context.Context, mirror, commit string) string {
	out, err := git(ctx, "", "--git-dir", mirror, "describe", "--tags", "--long", "--match", "*[0-9]*", commit)
	if err != nil {
		return ""
	}
	return scmVersionOf(strings.TrimSpace(out))
}

var (
	describeRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^v?(.+)-(\d+)-g([0-9a-f]+)$`) })
	numberRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+`) })
	separatorRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-_.]+`) })
)

func scmVersionOf(describe string) string {
	m := describeRE().FindStringSubmatch(describe)
	if m == nil {
		return ""
	}
	tag, distance, node := m[1], m[2], m[3]
	if distance == "0" {
		return tag
	}
	if base, _, ok := strings.Cut(tag, ".dev"); ok {
		return base + ".dev" + distance + "+g" + node
	}
	// the next release: the last number of the tag plus one
	loc := numberRE().FindAllStringIndex(tag, -1)
	if len(loc) == 0 {
		return ""
	}
	last := loc[len(loc)-1]
	n, _ := strconv.Atoi(tag[last[0]:last[1]])
	return tag[:last[0]] + strconv.Itoa(n+1) + ".dev" + distance + "+g" + node
}

// scmVersionEnv pretends the version for the repository's distribution
// (named like the repository) only, not for dependencies built from sdists.
func scmVersionEnv(repo, version string) string {
	_, name, _ := strings.Cut(repo, "/")
	name = strings.ToUpper(separatorRE().ReplaceAllString(name, "_"))
	return "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + name + "=" + version
}
