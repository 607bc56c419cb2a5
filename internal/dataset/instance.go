package dataset

import (
	"strings"

	"github.com/minisandbox/msb/internal/patch"
)

// Source is the dataset family of a row.
type Source string

// The dataset families.
const (
	SWEBench Source = "swe-bench"
	SWEGym   Source = "swe-gym"
	SWESmith Source = "swe-smith"
	Custom   Source = "custom"
)

// Instance is one task. JSON field names are the datasets' own.
type Instance struct {
	InstanceID             string   `json:"instance_id"`
	Repo                   string   `json:"repo"`
	BaseCommit             string   `json:"base_commit"`
	Patch                  string   `json:"patch"`
	TestPatch              string   `json:"test_patch"`
	ProblemStatement       string   `json:"problem_statement"`
	HintsText              string   `json:"hints_text"`
	Version                string   `json:"version"`
	EnvironmentSetupCommit string   `json:"environment_setup_commit"`
	FailToPass             []string `json:"FAIL_TO_PASS"`
	PassToPass             []string `json:"PASS_TO_PASS"`
	CreatedAt              string   `json:"created_at"`
	ImageName              string   `json:"image_name,omitempty"` // SWE-smith: the environment shared by instances
	// Image, when set, is the image the instance runs on (image.go): its
	// repository at /testbed, no environment built.
	Image  string `json:"docker_image,omitempty"`
	Source Source `json:"source"`
	// RepoURL, when set, is where the repository is cloned from (a URL or a
	// local path) instead of GitHub.
	RepoURL string `json:"repo_url,omitempty"`
	// MultiSWE holds a Multi-SWE-bench row's own fields (multiswe.go).
	MultiSWE *MultiSWE `json:"multi_swe,omitempty"`
}

// BugIsGoldPatch reports whether the dataset's "patch" introduces the bug
// (SWE-smith) rather than fixing it (the others). For such an instance the
// task's starting tree is the base commit with Patch applied, and the
// reference fix is Patch reversed.
func (in Instance) BugIsGoldPatch() bool { return in.Source == SWESmith }

// ReferenceFix is the patch that solves the task: the gold patch, or for an
// instance whose gold patch introduces the bug (SWE-smith) its reverse.
func (in Instance) ReferenceFix() string {
	if in.BugIsGoldPatch() {
		return patch.Reverse(in.Patch)
	}
	return in.Patch
}

// EnvironmentKey names the environment the instance's dependencies live in:
// SWE-smith instances share theirs by image_name; the others by repository
// and version.
func (in Instance) EnvironmentKey() string {
	if in.Source == SWESmith && in.ImageName != "" {
		return in.ImageName
	}
	return in.Repo + "@" + in.Version
}

// UpstreamRepo is the GitHub repository the code comes from. SWE-smith
// names its mirrors "swesmith/<owner>__<name>.<commit>"; that is turned back
// into "<owner>/<name>".
func (in Instance) UpstreamRepo() string {
	name, found := strings.CutPrefix(in.Repo, "swesmith/")
	if !found {
		return in.Repo
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	return strings.Replace(name, "__", "/", 1)
}
