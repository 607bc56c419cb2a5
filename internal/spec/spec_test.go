package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
)

const realDataset = "../../../shared/datasets/swe-bench-verified.jsonl"

func loadReal(t testing.TB) []dataset.Instance {
	t.Helper()
	if _, err := os.Stat(realDataset); err != nil {
		t.Skipf("real dataset not present: %v", err)
	}
	ins, rowErrs, err := dataset.Load(realDataset, dataset.Filter{})
	if err != nil || len(rowErrs) > 0 {
		t.Fatalf("loading: %v %v", err, rowErrs)
	}
	return ins
}

// TestEveryRealInstanceResolves: every row of SWE-bench Verified has a
// built-in spec, with a parser that exists and at least one test directive.
func TestEveryRealInstanceResolves(t *testing.T) {
	ins := loadReal(t)
	if len(ins) != 500 {
		t.Fatalf("%d instances", len(ins))
	}
	var noDirectives []string
	for _, in := range ins {
		s, err := Resolve(in, nil)
		if err != nil {
			t.Errorf("%s: %v", in.InstanceID, err)
			continue
		}
		if len(s.TestDirectives(in.TestPatch)) == 0 {
			// The harness then runs the whole suite; only django__django-10097
			// (its test_patch changes .txt data files only) is like that.
			noDirectives = append(noDirectives, in.InstanceID)
		}
		if len(TestFiles(in.TestPatch)) == 0 && !strings.Contains(in.TestPatch, "new file mode") {
			t.Errorf("%s: no test files to reset", in.InstanceID)
		}
		if EnvironmentCommit(in) != in.EnvironmentSetupCommit {
			t.Errorf("%s: environment commit %s", in.InstanceID, EnvironmentCommit(in))
		}
	}
	if want := []string{"django__django-10097"}; !reflect.DeepEqual(noDirectives, want) {
		t.Errorf("instances without test directives = %q, want %q", noDirectives, want)
	}
}

func TestTestCommand(t *testing.T) {
	ins := loadReal(t)
	byID := map[string]dataset.Instance{}
	for _, in := range ins {
		byID[in.InstanceID] = in
	}
	tests := []struct {
		id, want string
		parser   string
	}{
		{"django__django-11099", "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators", grading.ParserDjango},
		{"astropy__astropy-12907", "pytest -rA astropy/modeling/tests/test_separable.py", grading.ParserPytestV2},
		{"sympy__sympy-20590", "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose sympy/core/tests/test_basic.py", grading.ParserSympy},
		{"psf__requests-2317", "pytest -rA test_requests.py", grading.ParserPytestOptions},
		{"mwaskom__seaborn-3190", "pytest --no-header -rA tests/_core/test_scales.py", grading.ParserSeaborn},
		{"sphinx-doc__sphinx-8435", "tox --current-env -epy39 -v -- tests/roots/test-ext-autodoc/target/annotations.py tests/test_ext_autodoc_configs.py", grading.ParserPytestV2},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			in, ok := byID[tc.id]
			if !ok {
				t.Skip("not in dataset")
			}
			s, err := Resolve(in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.TestCommand(in); got != tc.want {
				t.Errorf("TestCommand = %q\nwant %q", got, tc.want)
			}
			if s.LogParser != tc.parser {
				t.Errorf("LogParser = %s, want %s", s.LogParser, tc.parser)
			}
		})
	}
}

func TestDirectives(t *testing.T) {
	tp := "diff --git a/tests/model_fields/test_x.py b/tests/model_fields/test_x.py\n" +
		"diff --git a/tests/fixtures/data.json b/tests/fixtures/data.json\n" +
		"diff --git a/tests/a/b_csv b/tests/a/b_csv\n" +
		"diff --git a/tests/templates/t.html b/tests/templates/t.html\n"
	dj := Spec{Directives: DirectivesDjango}.TestDirectives(tp)
	if want := []string{"model_fields.test_x", "templates.t.html"}; !reflect.DeepEqual(dj, want) {
		t.Errorf("django directives = %q, want %q", dj, want)
	}
	py := Spec{Directives: DirectivesPaths}.TestDirectives(tp)
	if want := []string{"tests/model_fields/test_x.py", "tests/templates/t.html"}; !reflect.DeepEqual(py, want) {
		t.Errorf("path directives = %q, want %q", py, want)
	}
	if got := (Spec{Directives: DirectivesNone}).TestDirectives(tp); got != nil {
		t.Errorf("none directives = %q", got)
	}
}

func TestBuiltinTable(t *testing.T) {
	for _, repo := range BuiltinRepos() {
		for _, v := range BuiltinVersions(repo) {
			s, ok := Builtin(repo, v)
			if !ok {
				t.Fatalf("%s %s listed but not found", repo, v)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("%s %s: %v", repo, v, err)
			}
		}
	}
	s, _ := Builtin("django/django", "1.9")
	if s.TestCmd != testDjangoNoPar {
		t.Errorf("django 1.9 test_cmd = %q", s.TestCmd)
	}
	s, _ = Builtin("sphinx-doc/sphinx", "8.0")
	if s.Python != "3.10" || !slices.Contains(s.SystemPackages, "graphviz") {
		t.Errorf("sphinx 8.0 = %+v", s)
	}
	// From 3.4 on, tox gets the venv's interpreter; before, its tox.ini
	// runs pytest from PATH and the install step is the harness's.
	for v, want := range map[string]string{"3.3": "", "3.4": "python3.9", "8.0": "python3.10"} {
		s, _ = Builtin("sphinx-doc/sphinx", v)
		last := s.PreInstall[len(s.PreInstall)-1]
		if got := strings.Contains(last, ".tox/py39/bin"); got != (want != "") || (want != "" && !strings.Contains(last, want)) {
			t.Errorf("sphinx %s: last pre-install step %q, want the tox shim %v (%s)", v, last, want != "", want)
		}
	}
	s, _ = Builtin("django/django", "4.0")
	if !reflect.DeepEqual(s.RequirementsPaths, []string{"tests/requirements/py3.txt"}) {
		t.Errorf("django requirements = %q", s.RequirementsPaths)
	}
	// Builtin hands out copies.
	s.PipPackages = append(s.PipPackages, "x")
	a, _ := Builtin("pytest-dev/pytest", "5.1")
	a.PipPackages[0] = "mutated"
	b, _ := Builtin("pytest-dev/pytest", "5.2")
	if b.PipPackages[0] == "mutated" {
		t.Error("built-in specs share their lists")
	}
}

func TestDefaults(t *testing.T) {
	smith := dataset.Instance{InstanceID: "oauthlib__oauthlib.1fd52536.combine_file__x", Repo: "swesmith/oauthlib__oauthlib.1fd52536", Source: dataset.SWESmith}
	s, err := Resolve(smith, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.LogParser != grading.ParserPytestVerbose || s.Directives != DirectivesNone || !strings.HasPrefix(s.TestCmd, "pytest") {
		t.Errorf("SWE-smith default = %+v", s)
	}
	gym := dataset.Instance{InstanceID: "getmoto__moto-1", Repo: "getmoto/moto", Version: "4.1", Source: dataset.SWEGym,
		TestPatch: "diff --git a/tests/test_x.py b/tests/test_x.py\n"}
	s, err = Resolve(gym, nil)
	if err != nil || s.TestCommand(gym) != s.TestCmd+" tests/test_x.py" {
		t.Errorf("SWE-Gym default = %+v, %v", s, err)
	}
	unknown := dataset.Instance{InstanceID: "x-1", Repo: "me/proj", Version: "1", Source: dataset.SWEBench}
	if _, err := Resolve(unknown, nil); !errors.Is(err, ErrNoSpec) {
		t.Errorf("unknown repo: err = %v", err)
	}
	known := dataset.Instance{InstanceID: "y", Repo: "django/django", Version: "0.1", Source: dataset.SWEBench}
	if _, err := Resolve(known, nil); !errors.Is(err, ErrNoSpec) {
		t.Errorf("unknown version: err = %v", err)
	}
}

const specFile = `version: 1
defaults:
  pip_packages_append: [pytest-timeout]
repos:
  django/django:
    "*":
      python: "3.12"
      env: {PIP_NO_INDEX: "1"}
    "4.2":
      test_cmd: ./tests/runtests.py --verbosity 2 --parallel 1
  me/proj:
    "*":
      python: "3.11"
      install: pip install -e .
      test_cmd: python -m unittest -v
      log_parser: unittest
      directives: none
instances:
  django__django-16379:
    eval_commands_append: ["export TZ=UTC"]
    env: {EXTRA: "yes"}
`

func TestOverrides(t *testing.T) {
	p := filepath.Join(t.TempDir(), "specs.yaml")
	if err := os.WriteFile(p, []byte(specFile), 0o644); err != nil {
		t.Fatal(err)
	}
	ov, err := LoadOverrides(p)
	if err != nil {
		t.Fatal(err)
	}
	dj := dataset.Instance{InstanceID: "django__django-16379", Repo: "django/django", Version: "4.2", Source: dataset.SWEBench}
	s, err := Resolve(dj, ov)
	if err != nil {
		t.Fatal(err)
	}
	if s.Python != "3.12" || s.TestCmd != "./tests/runtests.py --verbosity 2 --parallel 1" ||
		!reflect.DeepEqual(s.EvalCommands, []string{"export TZ=UTC"}) ||
		!reflect.DeepEqual(s.Env, map[string]string{"PIP_NO_INDEX": "1", "EXTRA": "yes"}) ||
		s.PipPackages[len(s.PipPackages)-1] != "pytest-timeout" || len(s.Source) != 5 {
		t.Errorf("django override = %+v", s)
	}
	other := dj
	other.InstanceID, other.Version = "django__django-1", "3.0"
	s, _ = Resolve(other, ov)
	if s.Python != "3.12" || s.TestCmd != testDjango || len(s.EvalCommands) != 4 {
		t.Errorf("django 3.0 override = %+v", s)
	}
	mine := dataset.Instance{InstanceID: "proj-1", Repo: "me/proj", Version: "0.1", Source: dataset.Custom}
	s, err = Resolve(mine, ov)
	if err != nil || s.LogParser != grading.ParserUnittest || s.TestCommand(mine) != "python -m unittest -v" {
		t.Errorf("custom repo = %+v, %v", s, err)
	}
	// Built-in entries are not changed by applying overrides.
	if b, _ := Builtin("django/django", "4.2"); b.Python != "3.9" {
		t.Errorf("built-in changed: %+v", b)
	}
}

func TestBadSpecFiles(t *testing.T) {
	for name, content := range map[string]string{
		"no version":    "repos: {}\n",
		"misspelt key":  "version: 1\nrepos:\n  a/b:\n    \"*\": {pyhton: \"3.9\"}\n",
		"not yaml":      "version: [\n",
		"wrong version": "version: 2\n",
	} {
		if _, err := ParseOverrides([]byte(content)); !errors.Is(err, ErrBadSpecFile) {
			t.Errorf("%s: err = %v, want ErrBadSpecFile", name, err)
		}
	}
	ov, err := ParseOverrides([]byte("version: 1\nrepos:\n  a/b:\n    \"*\": {python: \"3.9\", test_cmd: pytest, log_parser: nosuch}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(dataset.Instance{InstanceID: "i", Repo: "a/b", Source: dataset.Custom}, ov); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("unknown parser: err = %v", err)
	}
	ov, _ = ParseOverrides([]byte("version: 1\nrepos:\n  a/b:\n    \"*\": {python: \"3.9\"}\n"))
	if _, err := Resolve(dataset.Instance{InstanceID: "i", Repo: "a/b", Source: dataset.Custom}, ov); !errors.Is(err, ErrInvalidSpec) ||
		!strings.Contains(err.Error(), "test_cmd") {
		t.Errorf("incomplete spec: err = %v", err)
	}
}

// TestLanguage: a spec names its language; Python's are as before, the
// others have toolchains and no python, and eval_env merges like env.
func TestLanguage(t *testing.T) {
	file := `version: 1
repos:
  me/gomod:
    "*":
      language: go
      toolchains: [go]
      install: go mod download
      test_cmd: go test -v ./...
      log_parser: unittest
      directives: none
      env: {GOFLAGS: -mod=mod}
      eval_env: {GOPROXY: "off"}
instances:
  gomod-1:
    eval_env: {GOFLAGS: -mod=mod}
`
	ov, err := ParseOverrides([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	in := dataset.Instance{InstanceID: "gomod-1", Repo: "me/gomod", Source: dataset.Custom}
	s, err := Resolve(in, ov)
	if err != nil {
		t.Fatal(err)
	}
	if s.IsPython() || s.Language != LangGo || !slices.Equal(s.Toolchains, []string{"go"}) ||
		!reflect.DeepEqual(s.EvalEnv, map[string]string{"GOPROXY": "off", "GOFLAGS": "-mod=mod"}) {
		t.Errorf("go spec = %+v", s)
	}
	if b, _ := Builtin("django/django", "4.2"); !b.IsPython() || b.Validate() != nil {
		t.Errorf("built-in django is not a valid Python spec: %+v", b)
	}
	base := Spec{TestCmd: "x", LogParser: grading.ParserUnittest, Directives: DirectivesNone}
	for name, tc := range map[string]struct {
		mod  func(*Spec)
		want string // in the error; "" for valid
	}{
		"python":             {func(s *Spec) { s.Python = "3.11" }, ""},
		"python by name":     {func(s *Spec) { s.Language, s.Python = "python", "3.11" }, ""},
		"python missing":     {func(s *Spec) {}, "python not set"},
		"rust":               {func(s *Spec) { s.Language, s.Toolchains = LangRust, []string{"rust"} }, ""},
		"cpp, no toolchains": {func(s *Spec) { s.Language = LangCPP }, ""},
		"unknown language":   {func(s *Spec) { s.Language = "cobol" }, "go, rust, java, javascript, typescript, c, cpp"},
		"go with python":     {func(s *Spec) { s.Language, s.Python = LangGo, "3.11" }, "python is for Python specs only"},
		"python toolchains":  {func(s *Spec) { s.Python, s.Toolchains = "3.11", []string{"go"} }, "set language"},
		"unknown toolchain":  {func(s *Spec) { s.Language, s.Toolchains = LangGo, []string{"go", "zig"} }, `toolchain "zig"`},
	} {
		t.Run(name, func(t *testing.T) {
			s := base
			tc.mod(&s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid spec refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSpec naming %q", err, tc.want)
			}
		})
	}
}

// TestToolchainVersions: a toolchain entry may carry a version where msb
// can fetch one (go, node, jre); any other name, a version elsewhere or a
// malformed one is refused with ErrInvalidSpec.
func TestToolchainVersions(t *testing.T) {
	for entry, ok := range map[string]bool{
		"go": true, "go@1.21.4": true, "node@18": true, "jre@11": true, "go@1.22rc1": true, "jre": true,
		"java@11": false, "maven@3.9": false, "go@": false, "go@latest": false, "node@18.": false,
		"node@1..2": false, "go@1.21/../x": false, "zig@1": false, "node@18@2": false,
	} {
		s := Spec{Language: LangGo, Toolchains: []string{entry}, TestCmd: "true", LogParser: "multiswe/gotest", Directives: DirectivesNone}
		if err := s.Validate(); (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalidSpec)) {
			t.Errorf("%q: err = %v, want ok %v", entry, err, ok)
		}
	}
	if n, v := ParseToolchain("node@18"); n != "node" || v != "18" {
		t.Errorf("ParseToolchain(node@18) = %q, %q", n, v)
	}
}
