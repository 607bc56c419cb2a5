package spec

import (
	"slices"
	"sync"

	"github.com/minisandbox/msb/internal/grading"
)

// The test commands of the SWE-bench harness.
const (
	testPytest        = "pytest -rA"
	testAstropyPytest = "pytest -rA -vv -o console_output_style=classic --tb=no"
	testDjango        = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
	testDjangoNoPar   = "./tests/runtests.py --verbosity 2"
	testSeaborn       = "pytest --no-header -rA"
	testSphinx        = "tox --current-env -epy39 -v --"
	testSympy         = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
)

// repoFacts holds what a repository's versions share.
type repoFacts struct {
	parser       string
	directives   Directives
	requirements []string // requirement files tried in order when Packages is "requirements.txt"
	envYML       []string // environment files tried in order when Packages is "environment.yml"
}

var repos = map[string]repoFacts{
	"astropy/astropy":           {parser: grading.ParserPytestV2},
	"django/django":             {parser: grading.ParserDjango, directives: DirectivesDjango, requirements: []string{"tests/requirements/py3.txt"}},
	"matplotlib/matplotlib":     {parser: grading.ParserMatplotlib, requirements: []string{"requirements/dev/dev-requirements.txt", "requirements/testing/travis_all.txt"}, envYML: []string{"environment.yml"}},
	"mwaskom/seaborn":           {parser: grading.ParserSeaborn},
	"pallets/flask":             {parser: grading.ParserPytest, requirements: []string{"requirements/dev.txt"}},
	"psf/requests":              {parser: grading.ParserPytestOptions},
	"pydata/xarray":             {parser: grading.ParserPytest, envYML: []string{"ci/requirements/environment.yml", "environment.yml"}},
	"pylint-dev/pylint":         {parser: grading.ParserPytestOptions, requirements: []string{"requirements_test.txt"}},
	"pytest-dev/pytest":         {parser: grading.ParserPytest},
	"scikit-learn/scikit-learn": {parser: grading.ParserPytestV2},
	"sphinx-doc/sphinx":         {parser: grading.ParserPytestV2},
	"sympy/sympy":               {parser: grading.ParserSympy, requirements: []string{"requirements-dev.txt", "requirements-test.txt"}},
}

// table maps repository, then version, to the spec's own fields; Builtin
// adds the repository's shared facts. fillTable fills it on first use
// (builtinTable), not at start-up: msb run never looks a spec up.
var (
	table     = map[string]map[string]Spec{}
	tableOnce sync.Once
)

// builtinTable returns table, filled.
func builtinTable() map[string]map[string]Spec {
	tableOnce.Do(fillTable)
	return table
}

func add(repo string, versions []string, s Spec, edit ...func(v string, s *Spec)) {
	if table[repo] == nil {
		table[repo] = map[string]Spec{}
	}
	for _, v := range versions {
		c := s
		c.PipPackages = slices.Clone(s.PipPackages)
		c.PackagesPip = slices.Clone(s.PackagesPip)
		c.SystemPackages = slices.Clone(s.SystemPackages)
		c.PreInstall = slices.Clone(s.PreInstall)
		c.EvalCommands = slices.Clone(s.EvalCommands)
		for _, e := range edit {
			e(v, &c)
		}
		table[repo][v] = c
	}
}

func vs(v ...string) []string { return v }

// Builtin returns the built-in spec for a repository and version.
func Builtin(repo, version string) (Spec, bool) {
	s, ok := builtinTable()[repo][version]
	if !ok {
		return Spec{}, false
	}
	f := repos[repo]
	s.Repo, s.Version = repo, version
	s.LogParser = f.parser
	s.Directives = f.directives
	if s.Directives == "" {
		s.Directives = DirectivesPaths
	}
	switch s.Packages {
	case "requirements.txt":
		s.RequirementsPaths = slices.Clone(f.requirements)
	case "environment.yml":
		s.EnvYMLPaths = slices.Clone(f.envYML)
	}
	s.PipPackages = slices.Clone(s.PipPackages)
	s.PackagesPip = slices.Clone(s.PackagesPip)
	s.SystemPackages = slices.Clone(s.SystemPackages)
	s.PreInstall = slices.Clone(s.PreInstall)
	s.EvalCommands = slices.Clone(s.EvalCommands)
	s.Bootstrap = bootstrap(s.Python)
	s.IndexDate = harnessIndexDate
	s.EvalInstall = true
	s.Source = []string{"builtin"}
	return s, true
}

// BuiltinRepos lists the repositories of the built-in table.
func BuiltinRepos() []string {
	t := builtinTable()
	out := make([]string, 0, len(t))
	for r := range t {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// BuiltinVersions lists a repository's versions in the built-in table.
func BuiltinVersions(repo string) []string {
	t := builtinTable()[repo]
	out := make([]string, 0, len(t))
	for v := range t {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// harnessIndexDate is about when the harness's environment images were
// built (their pip 24.2, setuptools 75.1.0, coverage 7.6.4, virtualenv
// 20.26.6): what their unpinned requirements resolved to then is what the
// index offered that day.
const harnessIndexDate = "2024-10-25"

// bootstrap is what the harness's conda environments of a Python version
// start with: pip, setuptools and wheel as conda installed them (read from
// the exported environments of the harness's images).
func bootstrap(python string) []string {
	switch python {
	case "3.5":
		return []string{"pip==10.0.1", "setuptools==40.2.0", "wheel==0.37.1"}
	case "3.6":
		return []string{"pip==21.2.2", "setuptools==58.0.4", "wheel==0.37.1"}
	case "3.7":
		return []string{"pip==22.3.1", "setuptools==65.6.3", "wheel==0.38.4"}
	}
	return []string{"pip==24.2", "setuptools==75.1.0", "wheel==0.44.0"}
}

// fillTable adds the SWE-bench harness's specs to table.
func fillTable() {
	sklearnInstall := "python -m pip install -v --no-use-pep517 --no-build-isolation -e ."
	add("scikit-learn/scikit-learn", vs("0.20", "0.21", "0.22"), Spec{
		Python: "3.6", Packages: "numpy scipy cython pytest pandas matplotlib", Install: sklearnInstall,
		PackagesPip: []string{"numpy==1.19.2", "scipy==1.5.2", "cython==0.29.24", "pytest==6.2.4", "pandas==1.1.5", "matplotlib==3.3.4"},
		PipPackages: []string{"cython", "numpy==1.19.2", "setuptools", "scipy==1.5.2"}, TestCmd: testPytest,
	})
	add("scikit-learn/scikit-learn", vs("1.3", "1.4", "1.5", "1.6"), Spec{
		Python: "3.9", Install: sklearnInstall, TestCmd: testPytest,
		Packages: "'numpy==1.19.2' 'scipy==1.5.2' 'cython==3.0.10' pytest 'pandas<2.0.0' 'matplotlib<3.9.0' setuptools pytest joblib threadpoolctl",
		PackagesPip: []string{"numpy==1.26.4", "scipy==1.13.0", "cython==3.0.7", "pytest==7.4.4", "pandas==2.2.3", "matplotlib==3.9.2",
			"setuptools", "joblib==1.4.2", "threadpoolctl==3.5.0"},
		PipPackages: []string{"cython", "setuptools", "numpy", "scipy"},
	})

	flaskPins := func(jinja, click, markupsafe string) []string {
		return []string{"setuptools==70.0.0", "Werkzeug==2.3.7", "Jinja2==" + jinja, "itsdangerous==2.1.2", "click==" + click, "MarkupSafe==" + markupsafe}
	}
	add("pallets/flask", vs("2.0"), Spec{Python: "3.9", Packages: "requirements.txt", Install: "python -m pip install -e .",
		PipPackages: flaskPins("3.0.1", "8.0.1", "2.1.3"), TestCmd: testPytest})
	add("pallets/flask", vs("2.1"), Spec{Python: "3.10", Packages: "requirements.txt", Install: "python -m pip install -e .",
		PipPackages: flaskPins("3.1.2", "8.1.3", "2.1.1"), TestCmd: testPytest})
	add("pallets/flask", vs("2.2", "2.3", "3.0", "3.1"), Spec{Python: "3.11", Packages: "requirements.txt", Install: "python -m pip install -e .",
		PipPackages: flaskPins("3.1.2", "8.1.3", "2.1.1"), TestCmd: testPytest})

	add("django/django", vs("1.7", "1.8", "1.9", "1.10", "1.11", "2.0", "2.1", "2.2"), Spec{
		Python: "3.5", Packages: "requirements.txt", Install: "python setup.py install", PipPackages: []string{"setuptools"},
		SystemPackages: []string{"locales"}, // and en_US.UTF-8 generated (the harness's apt-get and locale-gen)
		EvalCommands:   []string{"export LANG=en_US.UTF-8", "export LC_ALL=en_US.UTF-8", "export PYTHONIOENCODING=utf8", "export LANGUAGE=en_US:en"},
		TestCmd:        testDjango,
	}, func(v string, s *Spec) {
		if v == "1.9" {
			s.TestCmd = testDjangoNoPar
		}
	})
	add("django/django", vs("1.4", "1.5", "1.6"), Spec{Python: "3.5", Install: "python setup.py install", TestCmd: testDjango})
	add("django/django", vs("3.0", "3.1", "3.2"), Spec{
		Python: "3.6", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testDjango,
		EvalCommands: []string{"sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8", "export LANGUAGE=en_US:en", "export LC_ALL=en_US.UTF-8"},
	})
	add("django/django", vs("4.0"), Spec{Python: "3.8", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testDjango})
	add("django/django", vs("4.1", "4.2"), Spec{Python: "3.9", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testDjango})
	add("django/django", vs("5.0", "5.1", "5.2"), Spec{Python: "3.11", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testDjango})

	add("psf/requests", vs("0.7", "0.8", "0.9", "0.11", "0.13", "0.14", "1.1", "1.2", "2.0", "2.2", "2.3", "2.4", "2.5", "2.7", "2.8",
		"2.9", "2.10", "2.11", "2.12", "2.17", "2.18", "2.19", "2.22", "2.26", "2.25", "2.27", "2.31", "3.0"),
		Spec{Python: "3.9", Packages: "pytest", PackagesPip: []string{"pytest==7.4.4"}, Install: "python -m pip install .", TestCmd: testPytest})

	seabornPins := func(pandas string) []string {
		return []string{"contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "importlib-resources==6.0.1", "kiwisolver==1.4.5",
			"matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", "pandas==" + pandas, "pillow==10.0.0", "pyparsing==3.0.9", "pytest",
			"python-dateutil==2.8.2", "pytz==2023.3.post1", "scipy==1.11.2", "six==1.16.0", "tzdata==2023.1", "zipp==3.16.2"}
	}
	add("mwaskom/seaborn", vs("0.11"), Spec{Python: "3.9", Install: "python -m pip install -e .", PipPackages: seabornPins("1.3.5"), TestCmd: testSeaborn})
	add("mwaskom/seaborn", vs("0.12", "0.13", "0.14"), Spec{Python: "3.9", Install: "python -m pip install -e .[dev]", PipPackages: seabornPins("2.0.0"), TestCmd: testSeaborn})

	pytestPins := map[string][]string{
		"4.4": {"atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.13.1", "py==1.11.0", "setuptools==68.0.0", "six==1.16.0"},
		"4.5": {"atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.11.0", "py==1.11.0", "setuptools==68.0.0", "six==1.16.0", "wcwidth==0.2.6"},
		"4.6": {"atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "six==1.16.0", "wcwidth==0.2.6"},
		"5.0": {"atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "wcwidth==0.2.6"},
		"5.3": {"attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "wcwidth==0.2.6"},
		"5.4": {"py==1.11.0", "packaging==23.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.13.1"},
		"6.0": {"attrs==23.1.0", "iniconfig==2.0.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "toml==0.10.2"},
		"6.2": {"attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "toml==0.10.2"},
		"7.0": {"attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0"},
		"7.1": {"attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "tomli==2.0.1"},
		"7.4": {"iniconfig==2.0.0", "packaging==23.1", "pluggy==1.3.0", "exceptiongroup==1.1.3", "tomli==2.0.1"},
	}
	for v, same := range map[string]string{"5.1": "5.0", "5.2": "5.0", "6.3": "6.2", "7.2": "7.1", "8.0": "7.4", "8.1": "7.4", "8.2": "7.4", "8.3": "7.4", "8.4": "7.4"} {
		pytestPins[v] = pytestPins[same]
	}
	add("pytest-dev/pytest", vs("4.4", "4.5", "4.6", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.2", "6.3", "7.0", "7.1", "7.2", "7.4", "8.0", "8.1", "8.2", "8.3", "8.4"),
		Spec{Python: "3.9", Install: "python -m pip install -e .", TestCmd: testPytest}, func(v string, s *Spec) {
			s.PipPackages = slices.Clone(pytestPins[v])
			if v == "6.3" {
				s.PreInstall = []string{"sed -i 's/>=>=/>=/' setup.cfg"}
			}
		})

	qhull := []string{
		`QHULL_URL="http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"`,
		`QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"`,
		`QHULL_BUILD_DIR="/testbed/build"`,
		`wget -O "$QHULL_TAR" "$QHULL_URL"`,
		`mkdir -p "$QHULL_BUILD_DIR"`,
		`tar -xvzf "$QHULL_TAR" -C "$QHULL_BUILD_DIR"`,
	}
	add("matplotlib/matplotlib", vs("3.5", "3.6", "3.7", "3.8", "3.9"), Spec{
		Python: "3.11", Packages: "environment.yml", Install: "python -m pip install -e .", TestCmd: testPytest,
		SystemPackages: []string{"imagemagick", "ffmpeg", "texlive", "texlive-latex-extra", "texlive-fonts-recommended", "texlive-xetex", "texlive-luatex", "cm-super", "dvipng"},
		PreInstall:     qhull,
		PipPackages: []string{"contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "ghostscript", "kiwisolver==1.4.5", "numpy==1.25.2",
			"packaging==23.1", "pillow==10.0.0", "pikepdf", "pyparsing==3.0.9", "python-dateutil==2.8.2", "six==1.16.0", "setuptools==68.1.2",
			"setuptools-scm==7.1.0", "typing-extensions==4.7.1"},
	}, func(v string, s *Spec) {
		if v == "3.8" || v == "3.9" {
			s.Install = `python -m pip install --no-build-isolation -e ".[dev]"`
		}
	})
	add("matplotlib/matplotlib", vs("3.1", "3.2", "3.3", "3.4"), Spec{
		Python: "3.8", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testPytest,
		SystemPackages: []string{"imagemagick", "ffmpeg", "libfreetype6-dev", "pkg-config", "texlive", "texlive-latex-extra", "texlive-fonts-recommended", "texlive-xetex", "texlive-luatex", "cm-super"},
		PreInstall:     qhull,
		PipPackages:    []string{"pytest", "ipython"},
	})
	add("matplotlib/matplotlib", vs("3.0"), Spec{
		Python: "3.7", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testPytest,
		SystemPackages: []string{"imagemagick", "ffmpeg", "libfreetype6-dev", "pkg-config"},
		PreInstall:     qhull,
		PipPackages:    []string{"pytest"},
	})
	add("matplotlib/matplotlib", vs("2.0", "2.1", "2.2", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5"), Spec{
		Python: "3.5", Install: "python setup.py build; python setup.py install", TestCmd: testPytest,
		SystemPackages: []string{"imagemagick", "ffmpeg"},
		PipPackages:    []string{"pytest"}, ExecuteTestAsNonroot: true,
	})

	sphinxVersions := vs("1.5", "1.6", "1.7", "1.8", "2.0", "2.1", "2.2", "2.3", "2.4", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0", "4.1",
		"4.2", "4.3", "4.4", "4.5", "5.0", "5.1", "5.2", "5.3", "6.0", "6.2", "7.0", "7.1", "7.2", "7.3", "7.4", "8.0", "8.1")
	add("sphinx-doc/sphinx", sphinxVersions, Spec{
		Python: "3.9", PipPackages: []string{"tox==4.16.0", "tox-current-env==0.0.11", "Jinja2==3.0.3"},
		Install: "python -m pip install -e .[test]", PreInstall: []string{"sed -i 's/pytest/pytest -rA/' tox.ini"}, TestCmd: testSphinx,
	}, sphinxEdits)

	astropyPins := []string{"attrs==23.1.0", "exceptiongroup==1.1.3", "execnet==2.0.2", "hypothesis==6.82.6", "iniconfig==2.0.0", "numpy==1.25.2",
		"packaging==23.1", "pluggy==1.3.0", "psutil==5.9.5", "pyerfa==2.0.0.3", "pytest-arraydiff==0.5.0", "pytest-astropy-header==0.2.2",
		"pytest-astropy==0.10.0", "pytest-cov==4.1.0", "pytest-doctestplus==1.0.0", "pytest-filter-subpackage==0.1.2", "pytest-mock==3.11.1",
		"pytest-openfiles==0.5.0", "pytest-remotedata==0.4.0", "pytest-xdist==3.3.1", "pytest==7.4.0", "PyYAML==6.0.1", "setuptools==68.0.0",
		"sortedcontainers==2.4.0", "tomli==2.0.1"}
	add("astropy/astropy", vs("3.0", "3.1", "3.2", "4.1", "4.2", "4.3", "5.0", "5.1", "5.2", "v5.3"), Spec{
		Python: "3.9", Install: "python -m pip install -e .[test] --verbose", PipPackages: astropyPins, TestCmd: testPytest,
	}, func(v string, s *Spec) {
		if v != "3.0" && v != "3.1" && v != "3.2" {
			s.PreInstall = []string{`sed -i 's/requires = \["setuptools",/requires = \["setuptools==68.0.0",/' pyproject.toml`}
		}
		if v == "v5.3" {
			s.Python = "3.10"
		}
	})
	add("astropy/astropy", vs("0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3"), Spec{
		Python: "3.6", Install: "python -m pip install -e .[test] --verbose", Packages: "setuptools==38.2.4", PackagesPip: []string{"setuptools==38.2.4"}, TestCmd: testAstropyPytest,
		PipPackages: []string{"attrs==17.3.0", "exceptiongroup==0.0.0a0", "execnet==1.5.0", "hypothesis==3.44.2", "cython==0.27.3", "jinja2==2.10",
			"MarkupSafe==1.0", "numpy==1.16.0", "packaging==16.8", "pluggy==0.6.0", "psutil==5.4.2", "pyerfa==1.7.0", "pytest-arraydiff==0.1",
			"pytest-astropy-header==0.1", "pytest-astropy==0.2.1", "pytest-cov==2.5.1", "pytest-doctestplus==0.1.2", "pytest-filter-subpackage==0.1",
			"pytest-forked==0.2", "pytest-mock==1.6.3", "pytest-openfiles==0.2.0", "pytest-remotedata==0.2.0", "pytest-xdist==1.20.1",
			"pytest==3.3.1", "PyYAML==3.12", "sortedcontainers==1.5.9", "tomli==0.2.0"},
	})

	add("sympy/sympy", vs("0.7", "1.0", "1.1", "1.2", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11", "1.12"), Spec{
		Python: "3.9", Packages: "mpmath flake8", PackagesPip: []string{"mpmath==1.3.0", "flake8==7.1.1"}, PipPackages: []string{"mpmath==1.3.0", "flake8-comprehensions"},
		Install: "python -m pip install -e .", TestCmd: testSympy,
	})
	add("sympy/sympy", vs("1.13", "1.14"), Spec{
		Python: "3.9", Packages: "requirements.txt", PipPackages: []string{"mpmath==1.3.0"}, Install: "python -m pip install -e .", TestCmd: testSympy,
	})

	add("pylint-dev/pylint", vs("2.8", "2.9", "2.10", "2.11", "2.13", "2.14", "2.15", "2.16", "2.17", "3.0", "3.1", "3.2", "3.3", "4.0"), Spec{
		Python: "3.9", Packages: "requirements.txt", Install: "python -m pip install -e .", TestCmd: testPytest,
	}, func(v string, s *Spec) {
		switch v {
		case "2.8":
			s.PipPackages = []string{"pyenchant==3.2"}
			s.SystemPackages = []string{"libenchant-2-dev", "hunspell-en-us"}
		case "3.0", "3.1", "3.2", "3.3", "4.0":
			s.PipPackages = []string{"astroid==3.0.0a6", "setuptools"}
		}
	})

	add("pydata/xarray", vs("0.12", "0.18", "0.19", "0.20", "2022.03", "2022.06", "2022.09", "2023.07", "2024.05"), Spec{
		Python: "3.10", Packages: "environment.yml", Install: "python -m pip install -e .", NoUseEnv: true, TestCmd: testPytest,
		// ci/requirements/environment.yml by pip, at the versions of the
		// harness's images; cdms2 (conda only) and cfgrib (needs the
		// eccodes library) have no pip stand-in; pytest is left to
		// pip_packages (7.4.0; the images' pytest-env 1.1.5 wants 8.3.3,
		// which conda did not check and pip does).
		PackagesPip: []string{"aiobotocore==2.15.1", "boto3==1.35.23", "bottleneck==1.4.2", "cartopy==0.24.0", "cftime==1.6.4",
			"distributed==2024.10.0", "h5netcdf==1.4.0", "h5py==3.12.1", "hypothesis==6.115.5", "scitools-iris==3.10.0", "lxml==5.3.0",
			"matplotlib==3.9.2", "nc-time-axis==1.4.1", "netCDF4==1.7.1", "numba==0.60.0", "numexpr==2.10.1", "pint==0.24.3", "pooch==1.8.2",
			"PseudoNetCDF==3.4.0", "pydap==3.5", "pytest-cov==5.0.0", "pytest-env==1.1.5", "pytest-xdist==3.6.1",
			"rasterio==1.4.1", "seaborn==0.13.2", "sparse==0.15.4", "toolz==1.0.0", "zarr==2.18.3", "numbagg==0.8.2", "flox==0.9.12",
			"numpy_groupies==0.11.2", "fsspec==2024.10.0", "setuptools", "pip"},
		PipPackages: []string{"numpy==1.23.0", "packaging==23.1", "pandas==1.5.3", "pytest==7.4.0", "python-dateutil==2.8.2", "pytz==2023.3",
			"six==1.16.0", "scipy==1.11.1", "setuptools==68.0.0", "dask==2022.8.1"},
	})
}

// VenvPath is where a task's environment, a venv, is in its sandbox
// (envcache builds it there); specs that must name it use this.
const VenvPath = "/opt/msb/venv"

// toxPythonShim makes tox-current-env's interpreter (python, python3 and
// pythonX.Y for the spec's version py) the venv's. From Sphinx
// 3.4 on, tox.ini runs `python -X dev -m pytest`, and tox-current-env puts
// `.tox/py39/bin/python` first on PATH as a symlink to the interpreter that
// runs tox. In the harness's conda env that is a real interpreter and the
// symlink finds the env; a venv's interpreter reached through a symlink
// elsewhere is the bare base interpreter (the venv is found next to the path
// it is started by), without pytest. tox-current-env leaves an existing file
// alone, so the install step puts a script there that starts the venv's
// python by its own path (.tox/ is in Sphinx's .gitignore: no diff sees it).
func toxPythonShim(py string) string {
	return `mkdir -p .tox/py39/bin && for n in python python3 python` + py + `; do printf '#!/bin/sh\nexec ` + VenvPath +
		`/bin/python "$@"\n' > .tox/py39/bin/$n && chmod +x .tox/py39/bin/$n; done`
}

// sphinxEdits pins the dependencies that later broke old Sphinx versions,
// installs graphviz where the tests need it, as the harness does, and from
// 3.4 on gives tox the venv's interpreter (toxPythonShim).
func sphinxEdits(v string, s *Spec) {
	switch v {
	case "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0", "4.1", "4.2", "4.3", "4.4":
		s.PreInstall = append(s.PreInstall,
			"sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py",
			"sed -i 's/sphinxcontrib-applehelp/sphinxcontrib-applehelp<=1.0.7/' setup.py",
			"sed -i 's/sphinxcontrib-devhelp/sphinxcontrib-devhelp<=1.0.5/' setup.py",
			"sed -i 's/sphinxcontrib-qthelp/sphinxcontrib-qthelp<=1.0.6/' setup.py",
			"sed -i 's/alabaster>=0.7,<0.8/alabaster>=0.7,<0.7.12/' setup.py",
			`sed -i "s/'packaging',/'packaging', 'markupsafe<=2.0.1',/" setup.py`,
		)
		switch v {
		case "4.2", "4.3", "4.4":
			s.PreInstall = append(s.PreInstall,
				"sed -i 's/sphinxcontrib-htmlhelp>=2.0.0/sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4/' setup.py",
				"sed -i 's/sphinxcontrib-serializinghtml>=1.1.5/sphinxcontrib-serializinghtml>=1.1.5,<=1.1.9/' setup.py",
			)
		case "4.1":
			s.PreInstall = append(s.PreInstall,
				"grep -q 'sphinxcontrib-htmlhelp>=2.0.0' setup.py && sed -i 's/sphinxcontrib-htmlhelp>=2.0.0/sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4/' setup.py || sed -i 's/sphinxcontrib-htmlhelp/sphinxcontrib-htmlhelp<=2.0.4/' setup.py",
				"grep -q 'sphinxcontrib-serializinghtml>=1.1.5' setup.py && sed -i 's/sphinxcontrib-serializinghtml>=1.1.5/sphinxcontrib-serializinghtml>=1.1.5,<=1.1.9/' setup.py || sed -i 's/sphinxcontrib-serializinghtml/sphinxcontrib-serializinghtml<=1.1.9/' setup.py",
			)
		default:
			s.PreInstall = append(s.PreInstall,
				"sed -i 's/sphinxcontrib-htmlhelp/sphinxcontrib-htmlhelp<=2.0.4/' setup.py",
				"sed -i 's/sphinxcontrib-serializinghtml/sphinxcontrib-serializinghtml<=1.1.9/' setup.py",
			)
		}
	}
	switch v {
	case "7.2", "7.3", "7.4", "8.0", "8.1":
		s.SystemPackages = []string{"graphviz"}
	}
	if v == "8.0" || v == "8.1" {
		s.Python = "3.10"
	}
	if !slices.Contains(sphinxBeforeTox34, v) {
		s.PreInstall = append(s.PreInstall, toxPythonShim(s.Python)) // last: it names the final Python
	}
}

// sphinxBeforeTox34 are the Sphinx versions whose tox.ini runs pytest from
// PATH, before toxPythonShim is needed.
var sphinxBeforeTox34 = []string{"1.5", "1.6", "1.7", "1.8", "2.0", "2.1", "2.2", "2.3", "2.4", "3.0", "3.1", "3.2", "3.3"}
