package spec

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/minisandbox/msb/internal/dataset"
)

// Patch is one entry of a spec file: the fields it sets. A nil field is
// left as it was; the *_append fields add to the list before them.
type Patch struct {
	Language             *string           `yaml:"language"`
	Toolchains           *[]string         `yaml:"toolchains"`
	Python               *string           `yaml:"python"`
	Bootstrap            *[]string         `yaml:"bootstrap"`
	Packages             *string           `yaml:"packages"`
	PackagesPip          *[]string         `yaml:"packages_pip"`
	IndexDate            *string           `yaml:"index_date"`
	Base                 *string           `yaml:"base"`
	SystemPackages       *[]string         `yaml:"system_packages"`
	RequirementsPaths    *[]string         `yaml:"requirements_paths"`
	EnvYMLPaths          *[]string         `yaml:"env_yml_paths"`
	PipPackages          *[]string         `yaml:"pip_packages"`
	PipPackagesAppend    []string          `yaml:"pip_packages_append"`
	PreInstall           *[]string         `yaml:"pre_install"`
	PreInstallAppend     []string          `yaml:"pre_install_append"`
	Install              *string           `yaml:"install"`
	EvalCommands         *[]string         `yaml:"eval_commands"`
	EvalCommandsAppend   []string          `yaml:"eval_commands_append"`
	EvalInstall          *bool             `yaml:"eval_install"`
	TestCmd              *string           `yaml:"test_cmd"`
	Directives           *Directives       `yaml:"directives"`
	LogParser            *string           `yaml:"log_parser"`
	NoUseEnv             *bool             `yaml:"no_use_env"`
	ExecuteTestAsNonroot *bool             `yaml:"execute_test_as_nonroot"`
	RepoDir              *string           `yaml:"repo_dir"`
	Env                  map[string]string `yaml:"env"`      // merged key by key
	EvalEnv              map[string]string `yaml:"eval_env"` // merged key by key
}

// Overrides is a parsed spec file.
type Overrides struct {
	Version   int                         `yaml:"version"`
	Defaults  *Patch                      `yaml:"defaults"`
	Repos     map[string]map[string]Patch `yaml:"repos"`
	Instances map[string]Patch            `yaml:"instances"`

	path string // where it was read from, for Spec.Source
}

// ErrBadSpecFile is returned for a spec file that cannot be used.
var ErrBadSpecFile = errors.New("bad spec file")

// LoadOverrides reads a YAML spec file.
func LoadOverrides(path string) (*Overrides, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading spec file: %w", err)
	}
	ov, err := ParseOverrides(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ov.path = path
	return ov, nil
}

// ParseOverrides parses a YAML spec file's content. Unknown keys are errors,
// so that a misspelt field is not silently ignored.
func ParseOverrides(b []byte) (*Overrides, error) {
	var ov Overrides
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&ov); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpecFile, err)
	}
	if ov.Version != 1 {
		return nil, fmt.Errorf("%w: version %d (want version: 1)", ErrBadSpecFile, ov.Version)
	}
	ov.path = "spec file"
	return &ov, nil
}

// covers reports whether the overrides name the instance, its repository
// or set defaults (so that an unknown repository can be specified entirely
// by the user).
func (ov *Overrides) covers(in dataset.Instance) bool {
	if ov == nil {
		return false
	}
	_, repo := ov.Repos[in.Repo]
	_, inst := ov.Instances[in.InstanceID]
	return repo || inst || ov.Defaults != nil
}

// apply applies defaults, the repository's "*" entry, its version entry and
// the instance entry, in that order.
func (ov *Overrides) apply(s Spec, in dataset.Instance) Spec {
	if ov == nil {
		return s
	}
	if ov.Defaults != nil {
		s = ov.Defaults.apply(s, ov.path+": defaults")
	}
	if byVersion, ok := ov.Repos[in.Repo]; ok {
		if p, ok := byVersion["*"]; ok {
			s = p.apply(s, fmt.Sprintf("%s: repos.%s.*", ov.path, in.Repo))
		}
		if p, ok := byVersion[in.Version]; ok && in.Version != "*" {
			s = p.apply(s, fmt.Sprintf("%s: repos.%s.%s", ov.path, in.Repo, in.Version))
		}
	}
	if p, ok := ov.Instances[in.InstanceID]; ok {
		s = p.apply(s, fmt.Sprintf("%s: instances.%s", ov.path, in.InstanceID))
	}
	return s
}

func (p Patch) apply(s Spec, source string) Spec {
	setS := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setL := func(dst *[]string, v *[]string, add []string) {
		if v != nil {
			*dst = slices.Clone(*v)
		}
		if len(add) > 0 {
			*dst = append(slices.Clone(*dst), add...)
		}
	}
	setS(&s.Language, p.Language)
	setL(&s.Toolchains, p.Toolchains, nil)
	setS(&s.Python, p.Python)
	setL(&s.Bootstrap, p.Bootstrap, nil)
	setS(&s.Packages, p.Packages)
	setL(&s.PackagesPip, p.PackagesPip, nil)
	setS(&s.IndexDate, p.IndexDate)
	setS(&s.Base, p.Base)
	setL(&s.SystemPackages, p.SystemPackages, nil)
	setL(&s.RequirementsPaths, p.RequirementsPaths, nil)
	setL(&s.EnvYMLPaths, p.EnvYMLPaths, nil)
	setL(&s.PipPackages, p.PipPackages, p.PipPackagesAppend)
	setL(&s.PreInstall, p.PreInstall, p.PreInstallAppend)
	setS(&s.Install, p.Install)
	setL(&s.EvalCommands, p.EvalCommands, p.EvalCommandsAppend)
	setS(&s.TestCmd, p.TestCmd)
	setS(&s.LogParser, p.LogParser)
	setS(&s.RepoDir, p.RepoDir)
	if p.Directives != nil {
		s.Directives = *p.Directives
	}
	if p.EvalInstall != nil {
		s.EvalInstall = *p.EvalInstall
	}
	if p.NoUseEnv != nil {
		s.NoUseEnv = *p.NoUseEnv
	}
	if p.ExecuteTestAsNonroot != nil {
		s.ExecuteTestAsNonroot = *p.ExecuteTestAsNonroot
	}
	s.Env = mergeEnv(s.Env, p.Env)
	s.EvalEnv = mergeEnv(s.EvalEnv, p.EvalEnv)
	s.Source = append(slices.Clone(s.Source), source)
	return s
}

// mergeEnv is base with add's keys set over it (base itself when add is empty).
func mergeEnv(base, add map[string]string) map[string]string {
	if len(add) == 0 {
		return base
	}
	env := maps.Clone(base)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, add)
	return env
}
