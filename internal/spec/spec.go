package spec

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/patch"
)

// Directives says how test directives are derived from a test_patch.
type Directives string

// The ways to derive test directives.
const (
	// DirectivesPaths: the paths of the files the test_patch touches (pytest,
	// SymPy's bin/test), without data files.
	DirectivesPaths Directives = "paths"
	// DirectivesDjango: module names: "tests/" and ".py" removed, "/" turned into ".".
	DirectivesDjango Directives = "django"
	// DirectivesNone: run the test command as it is (the whole suite).
	DirectivesNone Directives = "none"
)

// Spec says how to build and test one repository at one version.
type Spec struct {
	Repo    string `json:"repo" yaml:"repo"`
	Version string `json:"version" yaml:"version"`

	// Language of the repository: "" or "python" for a Python spec (a
	// venv of Python, pip), else one of Languages (no venv: the
	// environment is Toolchains, Install fetches the dependencies).
	Language string `json:"language,omitempty" yaml:"language,omitempty"`
	// Toolchains: the toolchains a non-Python environment needs, by name
	// (one of ToolchainNames), or name@version (ParseToolchain), resolved
	// on the host or fetched from a registry by package envcache.
	Toolchains []string `json:"toolchains,omitempty" yaml:"toolchains,omitempty"`

	Python string `json:"python" yaml:"python"`
	// Bootstrap: pip requirements installed into the new venv before
	// anything else (pip, setuptools and wheel at the versions the
	// harness's conda environment had).
	Bootstrap []string `json:"bootstrap,omitempty" yaml:"bootstrap,omitempty"`
	Packages  string   `json:"packages,omitempty" yaml:"packages,omitempty"`
	// PackagesPip: pip requirements that stand in for Packages when it is a
	// conda package list or environment.yml (there is no conda here).
	PackagesPip []string `json:"packages_pip,omitempty" yaml:"packages_pip,omitempty"`
	// IndexDate (YYYY-MM-DD): builds see the package index as it was at
	// the end of that day, so unpinned requirements resolve as they did
	// then (the built-in specs: when the harness's images were built).
	IndexDate         string   `json:"index_date,omitempty" yaml:"index_date,omitempty"`
	RequirementsPaths []string `json:"requirements_paths,omitempty" yaml:"requirements_paths,omitempty"`
	EnvYMLPaths       []string `json:"env_yml_paths,omitempty" yaml:"env_yml_paths,omitempty"`
	PipPackages       []string `json:"pip_packages,omitempty" yaml:"pip_packages,omitempty"`
	// Base names the root the environment is built on instead of the
	// cache's (a Debian base, debian/<suite>/<key> or debian/<name>, or an
	// image): "" for the cache's.
	Base string `json:"base,omitempty" yaml:"base,omitempty"`
	// SystemPackages: Debian packages the environment needs (what the
	// harness's apt-get pre-install steps install). With Base, apt-get
	// installs them in a layer over it; otherwise the base must have them.
	SystemPackages []string `json:"system_packages,omitempty" yaml:"system_packages,omitempty"`
	PreInstall     []string `json:"pre_install,omitempty" yaml:"pre_install,omitempty"`
	Install        string   `json:"install,omitempty" yaml:"install,omitempty"`
	EvalCommands   []string `json:"eval_commands,omitempty" yaml:"eval_commands,omitempty"`
	// EvalInstall: run Install again before the tests, after the patches,
	// as the harness's eval script does (a patch to compiled code is built).
	EvalInstall bool       `json:"eval_install,omitempty" yaml:"eval_install,omitempty"`
	TestCmd     string     `json:"test_cmd" yaml:"test_cmd"`
	Directives  Directives `json:"directives" yaml:"directives"`
	LogParser   string     `json:"log_parser" yaml:"log_parser"`
	// NoUseEnv: install pip packages without a separate environment file (xarray in the harness).
	NoUseEnv bool `json:"no_use_env,omitempty" yaml:"no_use_env,omitempty"`
	// ExecuteTestAsNonroot: run the tests as an unprivileged user.
	ExecuteTestAsNonroot bool `json:"execute_test_as_nonroot,omitempty" yaml:"execute_test_as_nonroot,omitempty"`
	// RepoDir, for an instance on an image, is where the image keeps the
	// repository (an absolute path); "" lets msb look for it (the image's
	// WORKDIR, /testbed; /home/<repo> for Multi-SWE-bench).
	RepoDir string `json:"repo_dir,omitempty" yaml:"repo_dir,omitempty"`
	// Env: environment variables for the test command (on top of a clean environment).
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// EvalEnv: variables for the evaluation only, on top of Env (offline
	// switches the dependency step must not have, e.g. CARGO_NET_OFFLINE).
	EvalEnv map[string]string `json:"eval_env,omitempty" yaml:"eval_env,omitempty"`
	// Source says where the spec came from: "builtin", "default", and each override applied.
	Source []string `json:"source" yaml:"-"`
}

// nonTestExts are the harness's NON_TEST_EXTS: files that are not test
// directives. "csv" has no dot there, so "foo_csv" is excluded too.
var nonTestExts = []string{".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"}

// TestDirectives derives the arguments appended to the test command from
// a test_patch, as the harness's get_test_directives does.
func (s Spec) TestDirectives(testPatch string) []string {
	if s.Directives == DirectivesNone {
		return nil
	}
	var out []string
	for _, p := range patch.GitHeaderPaths(testPatch) {
		skip := false
		for _, ext := range nonTestExts {
			if strings.HasSuffix(p, ext) {
				skip = true
				break
			}
		}
		if skip {
			continue
		}
		if s.Directives == DirectivesDjango {
			p = strings.TrimSuffix(p, ".py")
			p = strings.TrimPrefix(p, "tests/")
			p = strings.ReplaceAll(p, "/", ".")
		}
		out = append(out, p)
	}
	return out
}

// TestCommand is the full test command for an instance: TestCmd followed by
// the directives, shell-quoted where needed.
func (s Spec) TestCommand(in dataset.Instance) string {
	parts := []string{s.TestCmd}
	for _, d := range s.TestDirectives(in.TestPatch) {
		parts = append(parts, ShellQuote(d))
	}
	return strings.Join(parts, " ")
}

// TestFiles are the files the test_patch changes that existed before it
// (the harness's `--- a/(.*)` match); they are reset to the base commit
// before the test_patch is applied and after the tests, so that a model
// patch cannot change them.
func TestFiles(testPatch string) []string { return patch.MinusPaths(testPatch) }

// EvalSteps are the commands an evaluation runs before it resets the test
// files: EvalCommands, then Install again when EvalInstall is set.
func (s Spec) EvalSteps() []string {
	steps := slices.Clone(s.EvalCommands)
	if s.EvalInstall && s.Install != "" {
		steps = append(steps, s.Install)
	}
	return steps
}

// EnvironmentCommit is the commit the environment is built from.
func EnvironmentCommit(in dataset.Instance) string {
	if in.EnvironmentSetupCommit != "" {
		return in.EnvironmentSetupCommit
	}
	return in.BaseCommit
}

// ShellQuote quotes s for bash when it holds anything but plain word
// characters (glob characters such as [ ] included).
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+@%,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ErrNoSpec is returned for an instance no built-in entry, default or override covers.
var ErrNoSpec = errors.New("no spec")

// ErrInvalidSpec is returned for a resolved spec that cannot be used.
var ErrInvalidSpec = errors.New("invalid spec")

// Resolve returns the spec for an instance: the built-in entry for its
// repository and version (for a Multi-SWE-bench row, its repository's
// entry, MultiSWEBuiltin; for SWE-smith and SWE-Gym rows without one, the
// default pytest spec), then the overrides (nil for none).
func Resolve(in dataset.Instance, ov *Overrides) (Spec, error) {
	repo := in.Repo
	s, ok := Builtin(repo, in.Version)
	if !ok && in.Source == dataset.MultiSWEBench {
		s, ok = MultiSWEBuiltin(in)
	}
	if !ok && in.Source != dataset.MultiSWEBench {
		var err error
		if s, ok, err = MultilingualBuiltin(in); err != nil {
			return Spec{}, err
		}
	}
	switch {
	case ok:
	case in.Source == dataset.SWESmith || in.Source == dataset.SWEGym:
		s = Default(repo, in.Version)
		if in.Source == dataset.SWESmith {
			s.Directives = DirectivesNone // the bug is in the code; the whole suite runs
		}
	case ov.covers(in):
		s = Spec{Repo: repo, Version: in.Version, Directives: DirectivesPaths, Source: []string{"empty"}}
	default:
		return Spec{}, fmt.Errorf("%w for %s (repo %q, version %q): add it to a spec file (docs/spec-format.md)",
			ErrNoSpec, in.InstanceID, repo, in.Version)
	}
	s = ov.apply(s, in)
	if err := s.validate(in.Image != ""); err != nil {
		return Spec{}, fmt.Errorf("spec for %s: %w", in.InstanceID, err)
	}
	return s, nil
}

// The languages a spec can name besides Python.
const (
	LangPython     = "python"
	LangGo         = "go"
	LangRust       = "rust"
	LangJava       = "java"
	LangJavaScript = "javascript"
	LangTypeScript = "typescript"
	LangC          = "c"
	LangCPP        = "cpp"
)

// Languages are the values of Spec.Language ("" means python).
var Languages = []string{LangPython, LangGo, LangRust, LangJava, LangJavaScript, LangTypeScript, LangC, LangCPP}

// ToolchainNames are the toolchains a spec can name in Toolchains.
// jre is a Java runtime besides the JDK (java): tests run on it.
var ToolchainNames = []string{"go", "rust", "node", "java", "jre", "maven", "gradle", "cmake", "gcc", "clang", "make"}

// IsPython reports whether s is a Python spec (a venv, pip, pytest).
func (s Spec) IsPython() bool { return s.Language == "" || s.Language == LangPython }

// Validate checks that the spec can be used.
func (s Spec) Validate() error { return s.validate(false) }

// validate is Validate; an instance on an image (onImage) needs no python,
// since nothing is built: the image has its interpreter.
func (s Spec) validate(onImage bool) error {
	if err := s.validateLanguage(); err != nil {
		return err
	}
	var missing []string
	if s.IsPython() && s.Python == "" && !onImage {
		missing = append(missing, "python")
	}
	if s.TestCmd == "" {
		missing = append(missing, "test_cmd")
	}
	if s.LogParser == "" {
		missing = append(missing, "log_parser")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not set", ErrInvalidSpec, strings.Join(missing, ", "))
	}
	if _, err := grading.Lookup(s.LogParser); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := s.validateRepoDir(onImage); err != nil {
		return err
	}
	switch s.Directives {
	case DirectivesPaths, DirectivesDjango, DirectivesNone:
	default:
		return fmt.Errorf("%w: directives %q (want paths, django or none)", ErrInvalidSpec, s.Directives)
	}
	return nil
}

// validateRepoDir checks RepoDir: a clean absolute path other than /,
// and only for an instance on an image (msb puts the repositories it
// checks out at /testbed).
func (s Spec) validateRepoDir(onImage bool) error {
	switch d := s.RepoDir; {
	case d == "":
		return nil
	case !onImage:
		return fmt.Errorf("%w: repo_dir %q is for instances on images (msb's own checkouts are at /testbed)", ErrInvalidSpec, d)
	case !path.IsAbs(d) || path.Clean(d) != d || d == "/":
		return fmt.Errorf("%w: repo_dir %q is not a clean absolute path below /", ErrInvalidSpec, d)
	}
	return nil
}

// validateLanguage checks Language, and the fields that only one kind of
// spec may have: python for Python, toolchains for the others.
func (s Spec) validateLanguage() error {
	if !slices.Contains(Languages, s.Language) && s.Language != "" {
		return fmt.Errorf("%w: language %q (want one of %s)", ErrInvalidSpec, s.Language, strings.Join(Languages, ", "))
	}
	if !s.IsPython() && s.Python != "" {
		return fmt.Errorf("%w: python %q set for a %s spec (python is for Python specs only)", ErrInvalidSpec, s.Python, s.Language)
	}
	if s.IsPython() && len(s.Toolchains) > 0 {
		return fmt.Errorf("%w: toolchains %q set for a Python spec (set language)", ErrInvalidSpec, s.Toolchains)
	}
	for _, tc := range s.Toolchains {
		if err := validateToolchain(tc); err != nil {
			return err
		}
	}
	return nil
}

// Default is the spec for a Python repository without a built-in entry:
// SWE-smith's pytest command and its parser (pytest_verbose, which reads
// the "name STATUS" lines of --verbose), and an editable install.
func Default(repo, version string) Spec {
	return Spec{
		Repo: repo, Version: version,
		Python:      "3.10",
		Install:     "python -m pip install -e .",
		PipPackages: []string{"pytest"},
		TestCmd:     "pytest --disable-warnings --color=no --tb=no --verbose",
		Directives:  DirectivesPaths,
		LogParser:   grading.ParserPytestVerbose,
		Source:      []string{"default"},
	}
}
