package spec

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// harnessVersion is the SWE-bench harness the built-in table follows
// (testdata/requirements.txt pins it).
const harnessVersion = "4.1.0"

// harnessScript runs the harness's code (its "specs" mode here).
const harnessScript = "../grading/testdata/harness/harness.py"

// harnessSpec is one entry of the harness's MAP_REPO_VERSION_TO_SPECS_PY.
// Its nano_cpus (a container's CPU share) has no counterpart in a spec.
type harnessSpec struct {
	Python               string   `json:"python"`
	Packages             string   `json:"packages"`
	Install              string   `json:"install"`
	PipPackages          []string `json:"pip_packages"`
	PreInstall           []string `json:"pre_install"`
	EvalCommands         []string `json:"eval_commands"`
	TestCmd              any      `json:"test_cmd"` // a string, or a list run with &&
	NoUseEnv             bool     `json:"no_use_env"`
	ExecuteTestAsNonroot bool     `json:"execute_test_as_nonroot"`
}

type harnessConstants struct {
	Version           string                            `json:"version"`
	Specs             map[string]map[string]harnessSpec `json:"specs"`
	RequirementsPaths map[string][]string               `json:"requirements_paths"`
	EnvYMLPaths       map[string][]string               `json:"env_yml_paths"`
	NonTestExts       []string                          `json:"non_test_exts"`
}

// loadHarness reads the harness's specs with the swebench package of the
// test venv, through package grading's harness.py.
func loadHarness(t *testing.T) harnessConstants {
	t.Helper()
	py := privtest.Python(t, "the harness's spec table (swebench of internal/spec/testdata/requirements.txt)")
	out, err := exec.Command(py, harnessScript, "-", "specs").Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		privtest.Skip(t, "reading the harness's specs with %s: %s", py, msg)
	}
	var h harnessConstants
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("%s specs: %v", harnessScript, err)
	}
	if h.Version != harnessVersion {
		t.Fatalf("the test venv has swebench %s; the table follows %s (testdata/requirements.txt)", h.Version, harnessVersion)
	}
	return h
}

// TestTableMatchesHarness compares every version of every repository of
// the built-in table with the real harness's specs, in both directions.
// What msb states differently on purpose is normalized away here, and only
// that (docs/swe-bench.md has the list): apt-get and locale steps become
// SystemPackages, Sphinx 3.4+ gets toxPythonShim, pip_packages are one pip
// call (order does not matter), and nano_cpus is not a spec's.
func TestTableMatchesHarness(t *testing.T) {
	h := loadHarness(t)
	for _, repo := range BuiltinRepos() {
		hv := h.Specs[repo]
		if hv == nil {
			t.Errorf("%s: not in the harness", repo)
			continue
		}
		for v := range hv {
			if _, ok := Builtin(repo, v); !ok {
				t.Errorf("%s %s: in the harness, not in the table", repo, v)
			}
		}
		for _, v := range BuiltinVersions(repo) {
			want, ok := hv[v]
			if !ok {
				t.Errorf("%s %s: in the table, not in the harness", repo, v)
				continue
			}
			got, _ := Builtin(repo, v)
			for _, d := range compareHarness(got, want) {
				t.Errorf("%s %s: %s", repo, v, d)
			}
		}
		f := repos[repo]
		if want := h.RequirementsPaths[repo]; !slices.Equal(f.requirements, want) {
			t.Errorf("%s: requirement files %q, harness %q", repo, f.requirements, want)
		}
		if want := h.EnvYMLPaths[repo]; !slices.Equal(f.envYML, want) {
			t.Errorf("%s: environment files %q, harness %q", repo, f.envYML, want)
		}
	}
	if !slices.Equal(nonTestExts, h.NonTestExts) {
		t.Errorf("non-test extensions %q, harness %q", nonTestExts, h.NonTestExts)
	}
}

// compareHarness lists how s differs from the harness's spec h.
func compareHarness(s Spec, h harnessSpec) []string {
	var d []string
	diff := func(field string, got, want any) {
		d = append(d, field+": msb "+jsonString(got)+", harness "+jsonString(want))
	}
	if s.Python != h.Python {
		diff("python", s.Python, h.Python)
	}
	if s.Packages != h.Packages {
		diff("packages", s.Packages, h.Packages)
	}
	if s.Install != h.Install {
		diff("install", s.Install, h.Install)
	}
	if tc := harnessTestCmd(h.TestCmd); s.TestCmd != tc {
		diff("test_cmd", s.TestCmd, tc)
	}
	if !slices.Equal(sorted(s.PipPackages), sorted(h.PipPackages)) {
		diff("pip_packages", s.PipPackages, h.PipPackages)
	}
	if !slices.Equal(s.EvalCommands, h.EvalCommands) {
		diff("eval_commands", s.EvalCommands, h.EvalCommands)
	}
	if s.NoUseEnv != h.NoUseEnv {
		diff("no_use_env", s.NoUseEnv, h.NoUseEnv)
	}
	if s.ExecuteTestAsNonroot != h.ExecuteTestAsNonroot {
		diff("execute_test_as_nonroot", s.ExecuteTestAsNonroot, h.ExecuteTestAsNonroot)
	}
	steps, system := splitSystemSteps(h.PreInstall)
	if own := msbPreInstall(s); !slices.Equal(own, steps) {
		diff("pre_install (system steps and msb's own removed)", own, steps)
	}
	if !slices.Equal(sorted(s.SystemPackages), system) {
		diff("system_packages (the harness's apt-get installs)", s.SystemPackages, system)
	}
	return d
}

func harnessTestCmd(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		parts := make([]string, len(c))
		for i, p := range c {
			parts[i], _ = p.(string)
		}
		return strings.Join(parts, " && ")
	}
	return ""
}

var aptInstall = regexp.MustCompile(`apt-get install -y ([^&;]+)`)

// splitSystemSteps separates the harness's pre-install steps that change
// the image's system (apt-get, the locale's generation) from the rest; the
// packages those steps install are returned sorted, "locales" included
// when a locale is generated.
func splitSystemSteps(pre []string) (steps, packages []string) {
	for _, line := range pre {
		switch {
		case strings.Contains(line, "apt-get"):
			for _, m := range aptInstall.FindAllStringSubmatch(line, -1) {
				packages = append(packages, strings.Fields(m[1])...)
			}
		case strings.Contains(line, "locale-gen"), strings.Contains(line, "/etc/locale.gen"):
			packages = append(packages, "locales")
		default:
			steps = append(steps, line)
		}
	}
	return steps, slices.Compact(sorted(packages))
}

// msbPreInstall is s.PreInstall without the steps msb adds of its own.
func msbPreInstall(s Spec) []string {
	shim := toxPythonShim(s.Python)
	return slices.DeleteFunc(slices.Clone(s.PreInstall), func(l string) bool {
		return s.TestCmd == testSphinx && l == shim
	})
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
