// Package spec says how to build and test an instance.
//
// The nouns:
//
//   - Spec: for one repository and version, the Python version, the system
//     packages and commands to run before installing (PreInstall), the
//     dependencies (Packages: a conda package list, "requirements.txt" or
//     "environment.yml"; PipPackages), the install command, the commands to
//     run before the tests at evaluation time (EvalCommands), the test
//     command, how test directives are derived from the test_patch
//     (Directives), and which log parser reads the output (LogParser, a
//     grading parser name).
//   - Language: what a spec builds, Python (the default, "") or one of
//     Languages. A non-Python spec has no Python version and no venv: it
//     names its Toolchains (host toolchains such as go, rust, java, maven,
//     node, by the names of ToolchainNames, which package envcache finds;
//     go, node and jre may carry a version, name@version, which envcache
//     fetches when the host's differs),
//     its install command is the dependency step, and EvalEnv holds the
//     variables only an evaluation gets.
//   - Table: the built-in specs, keyed by repository and version, covering
//     every repository and version of SWE-bench's Python repositories. The
//     facts (versions, pins, commands) are those of the SWE-bench harness.
//   - Default: the spec for SWE-smith and SWE-Gym repositories without an
//     entry (pytest, run on the whole repository for SWE-smith).
//   - The Multi-SWE-bench table (multiswe.go, MultiSWEBuiltin): the
//     non-Python specs of Multi-SWE-bench's repositories, per repository
//     and, where the benchmark's harness changes with the pull-request
//     number, per number range; the facts are those of its harness.
//   - The SWE-bench Multilingual table (multilingual.go,
//     MultilingualBuiltin): the non-Python specs of SWE-bench
//     Multilingual's repositories per version, made by one rule from the
//     swebench package's table (multilingual.json); rows of repositories
//     msb has no toolchain for get ErrToolchainUnavailable.
//   - Overrides: a user's YAML file that adds or changes specs per
//     repository, per version and per instance.
//
// The YAML format (see docs/spec-format.md):
//
//	version: 1
//	defaults:                  # applies to every instance
//	  pip_packages: [pytest]
//	repos:
//	  django/django:
//	    "*":                   # every version of the repository
//	      python: "3.11"
//	    "4.2":
//	      test_cmd: ./tests/runtests.py --verbosity 2 --parallel 1
//	instances:
//	  django__django-16379:
//	    eval_commands: ["export TZ=UTC"]
//
// Resolve applies, in order: the built-in entry (or the default),
// defaults, the repository's "*" entry, its version entry, then the
// instance entry. A field that is set replaces the field before it; lists
// are replaced, not merged, except the *_append fields, which add.
//
// An instance's environment is built from its environment_setup_commit when
// it has one (SWE-bench instances share it per version), and from its base
// commit otherwise.
package spec
