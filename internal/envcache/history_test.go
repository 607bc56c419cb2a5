package envcache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
)

// Where the shared SWE-bench Verified rows and a mirror of psf/requests
// (fetched from GitHub, all branches) are, beside the repository.
const (
	verifiedRows   = "../../../shared/datasets/swe-bench-verified.jsonl"
	requestsMirror = "../../../.mirror/psf+requests/repo"
)

// TestCleanHistoryRealRepo is TestCleanHistory (internal/task) on a real
// repository: psf__requests-1766's commit is cached first, then
// psf__requests-1724's, four weeks older, as a delta over it. In the older
// task's sandbox, nothing of the newer commit, of the mirror's tip, or of
// the blobs 1724's gold patch writes can be read, and the repository holds
// exactly what HEAD reaches.
func TestCleanHistoryRealRepo(t *testing.T) {
	rows := verifiedRowsOf(t, "psf__requests-1766", "psf__requests-1724")
	mirror, err := filepath.Abs(requestsMirror)
	if err != nil || !isDir(mirror) {
		t.Skipf("no mirror of psf/requests at %s (fetch it with the search tool's fetch github:psf/requests)", requestsMirror)
	}
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt, RepoSources: map[string]string{"psf/requests": mirror}})
	var preps []*Prepared
	for _, r := range rows {
		inst := dataset.Instance{InstanceID: r.ID, Repo: "psf/requests", BaseCommit: r.Base, EnvironmentSetupCommit: r.Base, Version: r.Version}
		preps = append(preps, prepare(t, c, inst, spec.Spec{Repo: "psf/requests", Version: r.Version, Python: "3.11"}))
	}
	if len(preps[1].RepoStack) != 2 {
		t.Fatalf("the older commit is not a delta over the newer: %v", preps[1].RepoStack)
	}
	tip := runCmd(t, "", "git", "--git-dir", mirror, "rev-parse", "HEAD")
	forbidden := []string{rows[0].Base, tip}
	for _, m := range regexp.MustCompile(`(?m)^index [0-9a-f]+\.\.([0-9a-f]+)`).FindAllStringSubmatch(rows[1].Patch, -1) {
		forbidden = append(forbidden, m[1])
	}
	sb := sandboxOf(t, rt, preps[1])
	var probe strings.Builder
	for _, sha := range forbidden {
		probe.WriteString("git cat-file -e " + sha + " 2>/dev/null && echo readable " + sha + "\n")
		probe.WriteString("git show " + sha + " >/dev/null 2>&1 && echo shown " + sha + "\n")
	}
	probe.WriteString(`git log --all --format=%H; git rev-list --all; git reflog --all; git for-each-ref; git remote
git fsck --lost-found --no-progress 2>&1; ls .git/packed-refs .git/FETCH_HEAD .git/ORIG_HEAD .git/logs 2>/dev/null
git cat-file --batch-all-objects --batch-check='%(objectname)' | sort > /tmp/held
git rev-list --objects HEAD | cut -d' ' -f1 | sort | diff - /tmp/held`)
	if got, want := sh(t, sb, "cd /testbed && "+probe.String()), rows[1].Base+"\n"+rows[1].Base; got != want {
		t.Fatalf("an agent reading git in %s finds:\n%s\nwant:\n%s", rows[1].ID, got, want)
	}
}

type verifiedRow struct {
	ID      string `json:"instance_id"`
	Base    string `json:"base_commit"`
	Patch   string `json:"patch"`
	Version string `json:"version"`
}

// verifiedRowsOf reads the named rows of SWE-bench Verified, in order.
func verifiedRowsOf(t *testing.T, ids ...string) []verifiedRow {
	data, err := os.ReadFile(verifiedRows)
	if err != nil {
		t.Skipf("no SWE-bench Verified rows at %s: %v", verifiedRows, err)
	}
	byID := map[string]verifiedRow{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r verifiedRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		byID[r.ID] = r
	}
	var out []verifiedRow
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("SWE-bench Verified has no row %s", id)
		}
		out = append(out, r)
	}
	return out
}
