package spec

import (
	"fmt"
	"maps"
	"slices"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading/multiswe"
)

// The Multi-SWE-bench table: one entry per repository of the benchmark
// (and per range of pull-request numbers where the harness's default
// instance of the repository changes its image or commands with the
// number), with the facts of the multi-swe-bench package (1.1.2,
// harness/repos/<lang>/<org>/<repo>.py): the dependency step is the
// image's prepare.sh after its checkout, the test command is its
// fix-run.sh after `git apply` (msb applies the model patch, then the
// test patch, then runs TestCmd), the parser is the instance's parse_log.
// The dependency caches' places and the offline switches of evaluations
// (CARGO_NET_OFFLINE, GOPROXY=off, npm's offline) are envcache's, the same
// for every spec of a language; only Maven's -o, which has no variable
// before Maven 3.9, is in the test commands.
// Where msb runs something else than the harness's image (a toolchain
// version, an offline switch, a build tool that cannot be had here),
// docs/languages.md says what and why, and TestMultiSWETableMatchesHarness
// checks the test commands against the package's own scripts with exactly
// those differences.

// msbEntry is the spec of a repository's rows whose numbers lie in
// [from, to] (0: unbounded).
type msbEntry struct {
	from, to int64
	spec     Spec
	// edit adjusts the spec for one row's number (jackson-core's versions).
	edit func(number int64, s *Spec)
}

// The toolchain sets of the table (spec.ToolchainNames).
var (
	tcRust  = []string{"rust"}
	tcGo    = []string{"go"}
	tcMaven = []string{"java", "maven"}
	// tcMavenJRE11: Maven on the host's JDK, the tests on a Java 11
	// runtime (surefireJRE), as the harness's JDK 11 image runs them.
	tcMavenJRE11 = []string{"java", "maven", "jre@11"}
	tcNode       = []string{"node"}
	tcCMake      = []string{"gcc", "cmake", "make"}
)

// utf8 is the locale the harness's images set (LANG, LC_ALL): Java's
// default file encoding and the tests' text depend on it.
var utf8 = map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

// javaEnv is utf8 with glibc's malloc arenas capped: a sandbox without a
// cgroup bounds each process's address space (RLIMIT_AS, 4 GiB by
// default), and a JVM's threads, each with a 64 MiB arena reserved, make
// Maven's JVM fail to start under it ("insufficient memory for the Java
// Runtime Environment"). The arenas change nothing the tests see.
var javaEnv = map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MALLOC_ARENA_MAX": "2"}

// Commands of the harness's scripts, and the changes msb makes to them
// (docs/languages.md, "Toolchains").
const (
	// mvnOffline is Maven as an evaluation runs it: offline (-o), from the
	// local repository the dependency step filled, and without colours,
	// as in the harness's containers, which have no terminal (a sandbox's
	// has one, and gson's parser does not strip the colour codes Maven
	// puts inside class names).
	mvnOffline = "mvn -o -Dstyle.color=never"
	// mvnTestArgs are the harness's Maven test arguments.
	mvnTestArgs = "clean test -Dmaven.test.skip=false -DfailIfNoTests=false"
	// java8OnJDK17: the harness builds jackson-core on JDK 8; on JDK 17,
	// whose javac cannot target 1.6, the sources compile as 1.8.
	java8OnJDK17 = "-Djavac.src.version=1.8 -Djavac.target.version=1.8 -Dmaven.compiler.source=1.8 -Dmaven.compiler.target=1.8"
	// gsonJava8: gson's older poms target 1.6 through java.version (JDK
	// 11 in the harness still compiles it; JDK 17 does not), which 1.8
	// raises. Surefire hands the property on to the tests' JVM as well,
	// where #1093's tests do not read it.
	gsonJava8 = "-Djava.version=1.8"
	// gsonJava11: from #1094 on gson's JavaVersion reads java.version in
	// the tests (a 1.8 takes Java 8's date and reflection paths on the
	// Java 11 runtime), and bnd-maven-plugin 3.1 reads it in Maven (it
	// refuses a bare "11"): so the tests and bnd see a JDK 11's version
	// and the compiler (3.7, which prefers release to source and target)
	// targets Java 8.
	gsonJava11 = "-Djava.version=11.0.13 -Dmaven.compiler.release=8"
	// gsonNoJDK17Profile: the newer gson's JDK17 profile, which Maven
	// activates on the host's JDK 17 and the harness's JDK 11 does not,
	// compiles the tests for Java 17 (and adds records tests), which the
	// Java 11 runtime cannot load.
	gsonNoJDK17Profile = "-P '!JDK17'"
	// surefireJRE runs Surefire's forked test JVMs on the jre toolchain
	// (JRE_HOME; jre@11 is a Java 11 runtime without javac, so Maven and
	// javac stay on the host's JDK 17): gson's tests reflect into
	// java.base, which JDK 11 permits by default and JDK 17 refuses, and
	// format dates with JDK 11's locale data.
	surefireJRE = "-Djvm=$JRE_HOME/bin/java"
	// cmakeBuildTestFmt and cmakeBuildTestCatch2 are fix-run.sh after the
	// patches: the harness's lines run under set -e, here joined with &&
	// in a subshell so that the eval script's cwd stays /testbed.
	cmakeBuildTestFmt = "(cd build && cmake .. && cmake --build . && ctest)"
	// Catch2's also runs where the harness's image has the repository,
	// /home/Catch2, because a configure check's name holds the source
	// directory (HAVE_FLAG__ffile_prefix_map__home_Catch2__); and without
	// a memory checker: the host's valgrind, which the image lacks, would
	// make CTest set MEMORYCHECK_COMMAND, under which Catch2 leaves out
	// MultiReporter::CapturingReportersDontPropagateStdOut. /home/Catch2
	// is a copy of /testbed (patches applied), not a link to it: the
	// ApprovalTests script strips its own real path (realpath) from the
	// reporters' output, whose paths cmake made from the logical one, so
	// through a link every baseline differs (found on #2849). A sandbox
	// cannot bind-mount, and the copy costs seconds beside the build.
	cmakeBuildTestCatch2 = "(rm -rf /home/Catch2 && mkdir -p /home && cp -a /testbed /home/Catch2 && cd /home/Catch2/build && " +
		"cmake -DCATCH_DEVELOPMENT_BUILD=ON -DMEMORYCHECK_COMMAND= .. && make && ctest)"
	// jqBuildTest is jq's fix-run.sh after the patches, configured
	// without valgrind: the harness's image has none, so tests/setup runs
	// jq bare there, while configure finds the host's here and make check
	// then runs every shell test under valgrind --error-exitcode=1, which
	// failed tests/shtest on #2674 and #2658 (bases before jq's 24871fb4,
	// "Fix memory leak on halt_error/1", which shtest calls under
	// valgrind) and takes several times as long.
	// --disable-valgrind is in every row's configure.ac (NO_VALGRIND=1
	// through TESTS_ENVIRONMENT, which an environment variable cannot set).
	jqBuildTest = "autoreconf -i && ./configure --with-oniguruma=builtin --disable-valgrind && make clean && make -j8 && make check"
	// glibcHeader is a header force-included into old Catch2 builds:
	// glibc 2.34+ makes MINSIGSTKSZ a sysconf call under _GNU_SOURCE
	// (which g++ always defines), which Catch2 2.x uses as a constant.
	// It lives in .git so that git never shows it as a change.
	glibcHeader = "/testbed/.git/msb-glibc-minsigstksz.h"
	// oldCatch2Flags are old Catch2's CXXFLAGS: the glibc header, and no
	// -Wredundant-move, a warning GCC 9 added to -Wextra, which the
	// harness's gcc 7 lacks and which Catch2's development build makes an
	// error (#1448 and #1422: `return std::move(...)` in catch_session.cpp).
	oldCatch2Flags = "-include " + glibcHeader + " -Wno-redundant-move"
)

// mavenSpec is a Maven repository's entry: the harness's prepare (one
// online `mvn clean test` that fills the local repository; a failing test
// does not fail it) and its fix-run offline.
func mavenSpec(parser, extra string, env map[string]string, toolchains []string) Spec {
	args := mvnTestArgs
	if extra != "" {
		args += " " + extra
	}
	return Spec{
		Language: LangJava, Toolchains: toolchains, Env: env,
		Install:   "mvn " + args + " || true",
		TestCmd:   mvnOffline + " " + args,
		LogParser: parser,
	}
}

// cargoSpec is a Rust repository's entry: the dependencies fetched, the
// tests built once (the harness's prepare runs `cargo test || true`),
// then `cargo test` offline.
func cargoSpec() Spec {
	return cargoSpecEnv(utf8)
}

// cargoSpecEnv is cargoSpec with env.
func cargoSpecEnv(env map[string]string) Spec {
	return Spec{
		Language: LangRust, Toolchains: tcRust, Env: env,
		Install:   "cargo fetch\ncargo test --no-run || true",
		TestCmd:   "cargo test",
		LogParser: multiswe.ParserName(multiswe.FrameworkCargo),
	}
}

// ripgrepOldEnv is utf8 with rustc's lint on a macro's trailing semicolon
// in expression position back at warn. The harness's rust:latest images
// (rustc 1.90 or older when built) warned; rustc 1.91 denies it
// (rust-lang/rust#144369), so on the host's rustc ripgrep did not compile
// before its libripgrep rewrite (bb110c1e, 2018-08-20, after #1016), whose
// errored! macro ends `return Err(...);` (#954, #727, #723, #454).
var ripgrepOldEnv = map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "RUSTFLAGS": "-W semicolon_in_expressions_from_macros"}

// jacksonVersions: the harness's prepare for jackson-core replaces the
// pom's version of a row (its own and its jackson-base parent's, a
// SNAPSHOT) with a later SNAPSHOT, keyed by number (old_version,
// new_version; the rest: 2.15.0-rc2-SNAPSHOT). Those SNAPSHOTs lived in
// Sonatype's snapshot repository, which is gone; msb puts in the release
// before each (the last release of that line when the harness ran).
var jacksonVersions = map[int64][2]string{
	729:  {"2.14.0-SNAPSHOT", "2.14.3"},
	891:  {"2.15.0-SNAPSHOT", "2.15.4"},
	922:  {"2.15.0-SNAPSHOT", "2.15.4"},
	980:  {"2.15.0-rc3-SNAPSHOT", "2.15.4"},
	1016: {"2.16.0-SNAPSHOT", "2.16.2"},
	1053: {"2.16.0-SNAPSHOT", "2.16.2"},
	1172: {"2.17.0-SNAPSHOT", "2.17.3"},
	1182: {"2.17.0-SNAPSHOT", "2.17.3"},
	1204: {"2.17.0-SNAPSHOT", "2.17.3"},
	1208: {"2.17.0-SNAPSHOT", "2.17.3"},
	1263: {"2.18.0-SNAPSHOT", "2.18.4"},
	1309: {"2.17.2-SNAPSHOT", "2.17.3"},
}

// jacksonDefaultVersion is the harness's version pair for other numbers.
var jacksonDefaultVersion = [2]string{"2.15.0-rc2-SNAPSHOT", "2.15.4"}

// jacksonCore sets a jackson-core row's pom version step and, for PR 980,
// the harness's own test command (one failing-test class, -am).
func jacksonCore(number int64, s *Spec) {
	v, ok := jacksonVersions[number]
	if !ok {
		v = jacksonDefaultVersion
	}
	s.PreInstall = []string{fmt.Sprintf(`sed -i "s/%s/%s/g" pom.xml`, v[0], v[1])}
	if number == 980 {
		args := "clean test -Dsurefire.useFile=false -Dmaven.test.skip=false -Dtest=com.fasterxml.jackson.failing.PerfBigDecimalToInteger968 -DfailIfNoTests=false -am " + java8OnJDK17
		s.TestCmd = mvnOffline + " " + args
	}
}

// multiSWETable is msb's entries per repository, by pull request range.
// An install step is one command a line: the build script runs under
// set -e, which ignores a failure on the left of && (go mod download &&
// ... would commit an environment without its modules when the download
// failed).
var multiSWETable = map[string][]msbEntry{
	"tokio-rs/tokio": {{spec: cargoSpec()}},
	"tokio-rs/bytes": {{spec: cargoSpec()}},
	"BurntSushi/ripgrep": {
		{to: 1016, spec: cargoSpecEnv(ripgrepOldEnv)},
		{from: 1017, spec: cargoSpec()},
	},
	"rayon-rs/rayon": {{spec: cargoSpec()}},
	"zeromicro/go-zero": {{spec: Spec{
		Language: LangGo, Toolchains: tcGo, Env: utf8,
		// the harness's prepare runs the whole suite once (a warm build cache)
		Install:   "go mod download\ngo test -count=1 -run '^$' ./... || true",
		TestCmd:   "go test -v -count=1 ./...",
		LogParser: multiswe.ParserName(multiswe.FrameworkGoTest),
	}}},
	"fasterxml/jackson-core": {{
		spec: mavenSpec(multiswe.ParserName(multiswe.FrameworkSurefire), java8OnJDK17, javaEnv, tcMaven),
		edit: jacksonCore,
	}},
	"google/gson": {
		{to: 1093, spec: mavenSpec(multiswe.ParserName(multiswe.FrameworkSurefireRunning), gsonJava8+" "+surefireJRE, javaEnv, tcMavenJRE11)},
		{from: 1094, to: 1391, spec: mavenSpec(multiswe.ParserName(multiswe.FrameworkSurefireRunning), gsonJava11+" "+surefireJRE, javaEnv, tcMavenJRE11)},
		{from: 1392, spec: mavenSpec(multiswe.ParserName(multiswe.FrameworkSurefireRunning), gsonNoJDK17Profile+" "+surefireJRE, javaEnv, tcMavenJRE11)},
	},
	// Gradle 8, which mockito's wrapper downloads, cannot be had here:
	// the entry names the gradle toolchain, whose absence fails the build
	// at once (envcache: toolchain not found), and runs that Gradle, not
	// the wrapper, offline.
	"mockito/mockito": {{spec: Spec{
		Language: LangJava, Toolchains: []string{"java", "gradle"},
		Env:       map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MALLOC_ARENA_MAX": "2", "JAVA_TOOL_OPTIONS": "-Dfile.encoding=UTF-8 -Duser.timezone=Asia/Shanghai"},
		Install:   "gradle build || true",
		TestCmd:   "gradle --offline test",
		LogParser: multiswe.ParserName(multiswe.FrameworkGradle),
	}}},
	"axios/axios": {{spec: Spec{
		Language: LangJavaScript, Toolchains: tcNode, Env: utf8,
		Install:   "npm ci",
		TestCmd:   "npm test -- --reporter console",
		LogParser: multiswe.ParserName(multiswe.FrameworkMocha),
	}}},
	"iamkun/dayjs": {{spec: Spec{
		Language: LangJavaScript, Toolchains: tcNode, Env: utf8,
		Install:   "npm uninstall rollup\nnpm install rollup@latest --save-dev\nnpm install --legacy-peer-deps || npm install --force",
		TestCmd:   "npm test -- --verbose",
		LogParser: multiswe.ParserName(multiswe.FrameworkJest),
	}}},
	"darkreader/darkreader": {{spec: Spec{
		Language: LangTypeScript, Toolchains: tcNode,
		Install:   "npm ci",
		TestCmd:   "npm run test:ci -- --json --outputFile=test-results-unit.json",
		LogParser: multiswe.ParserName(multiswe.FrameworkJestDarkreader),
	}}},
	"fmtlib/fmt": {{spec: Spec{
		Language: LangCPP, Toolchains: tcCMake, Env: utf8,
		Install:   "mkdir -p build",
		TestCmd:   cmakeBuildTestFmt,
		LogParser: multiswe.ParserName(multiswe.FrameworkCTestFmt),
	}}},
	"catchorg/Catch2": {
		{to: 2187, spec: Spec{
			Language: LangCPP, Toolchains: tcCMake,
			Env:       map[string]string{"CXXFLAGS": oldCatch2Flags},
			Install:   "mkdir -p build\n" + `printf '#include <features.h>\n#undef __USE_DYNAMIC_STACK_SIZE\n' > ` + glibcHeader,
			TestCmd:   cmakeBuildTestCatch2,
			LogParser: multiswe.ParserName(multiswe.FrameworkCTestCatch2),
		}},
		{from: 2188, spec: Spec{
			Language: LangCPP, Toolchains: tcCMake,
			Install:   "mkdir -p build",
			TestCmd:   cmakeBuildTestCatch2,
			LogParser: multiswe.ParserName(multiswe.FrameworkCTestCatch2),
		}},
	},
	"jqlang/jq": {{spec: Spec{
		Language: LangC, Toolchains: []string{"gcc", "make"}, Env: utf8,
		SystemPackages: []string{"autoconf", "automake", "libtool"},
		// the oniguruma submodule at its pinned commit (the repository
		// layer has checked it out when --repos-dir holds it)
		Install:   "git submodule update --init",
		TestCmd:   jqBuildTest,
		LogParser: multiswe.ParserName(multiswe.FrameworkAutomake),
	}}},
}

// MultiSWEBuiltin returns the built-in spec of a Multi-SWE-bench row: the
// entry of its repository whose number range holds the row's number.
func MultiSWEBuiltin(in dataset.Instance) (Spec, bool) {
	if in.MultiSWE == nil {
		return Spec{}, false
	}
	n := in.MultiSWE.Number
	for _, e := range multiSWETable[in.Repo] {
		if (e.from != 0 && n < e.from) || (e.to != 0 && n > e.to) {
			continue
		}
		s := e.spec
		s.Toolchains = slices.Clone(s.Toolchains)
		s.SystemPackages = slices.Clone(s.SystemPackages)
		s.PreInstall = slices.Clone(s.PreInstall)
		s.Env, s.EvalEnv = maps.Clone(s.Env), maps.Clone(s.EvalEnv)
		if e.edit != nil {
			e.edit(n, &s)
		}
		s.Repo, s.Version = in.Repo, in.Version
		s.Directives = DirectivesNone
		s.Source = []string{"builtin"}
		return s, true
	}
	return Spec{}, false
}

// MultiSWERepos lists the repositories of the table, sorted.
func MultiSWERepos() []string {
	repos := slices.Collect(maps.Keys(multiSWETable))
	slices.Sort(repos)
	return repos
}
