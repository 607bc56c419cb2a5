package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/grading/multiswe"
	"github.com/minisandbox/msb/internal/privtest"
)

// quitCtor ends every program that loads it with status 0 before its
// main: code under test that makes every test pass.
const quitCtor = "#include <unistd.h>\n\n__attribute__((constructor)) static void quit(void) { _exit(0); }\n"

// ctestProject is a CMake project whose tests are listed in tests/ and
// run by ctest, in C or C++ (lang), with top prepended to the top-level
// CMakeLists.txt's body: where a patch would put CMake code of its own.
func ctestProject(lang, top string) map[string]string {
	ext := map[string]string{"C": "c", "CXX": "cpp"}[lang]
	return map[string]string{
		"CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc " + lang + ")\n" + top +
			"enable_testing()\nadd_library(calc calc." + ext + ")\nadd_subdirectory(tests)\n",
		"calc.h":      "int add(int a, int b);\n",
		"calc." + ext: "#include \"calc.h\"\n\nint add(int a, int b) { return a + b; }\n",
		"tests/CMakeLists.txt": "add_executable(add_test add_test." + ext + ")\ntarget_link_libraries(add_test calc)\n" +
			"add_test(NAME adds COMMAND add_test)",
		"tests/add_test." + ext: "#include \"../calc.h\"\n\nint main(void) { return add(2, 3) == 5 ? 0 : 1; }\n",
	}
}

// TestCTestCanary runs the CTest canary with the real cmake and ctest in
// CMake projects made here, the test command configuring, building and
// running ctest as fmt's and Catch2's rows do, parses its output with
// both ctest parsers of Multi-SWE-bench, and judges it: clean on an
// honest project (C and C++, a command whose ctest selects tests of its
// own; a test file whose directory the build does not add, the canary
// then in the top-level CMakeLists.txt), tampered where the patch's CMake
// code runs every test program through an emulator that exits 0 (every
// test reported passed). The CMakeLists.txt files it appended to are put
// back as they were. The canary's program is linked as the test programs
// are, the project's static libraries whole: a constructor in the code
// under test (in a static or a shared library) or an entry point a
// library's link options set, each ending every test program with status
// 0, is flagged, and a test main in a library of its own (as gtest_main,
// calling what each test program defines) links and stays clean.
func TestCTestCanary(t *testing.T) {
	for _, tool := range []string{"cmake", "ctest", "cc", "c++"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, "%s not found", tool)
		}
	}
	const build = "mkdir -p build && (cd build && cmake .. && cmake --build . && ctest)"
	for _, tc := range []struct {
		name, lang, top, cmd string
		file                 string // the test patch's file, tests/add_test.c(pp) when ""
		reasons              int
		// shared: calc a shared library (the case's name without a comma:
		// CMake's -Wl,-rpath,<build dir> would split at it); testMain: the
		// tests' main in a library of its own.
		shared, testMain bool
		append           map[string]string // the patch: lines appended to files
		// dups: the tests also link static libraries that define one
		// symbol, as data and thread-local (a test program pulls in only
		// the first; --whole-archive fails): "two" in libdupa and libdupb,
		// "one" both in libdups. note: what the canary's link note says,
		// "" for none (every static library linked whole).
		dups, note string
		// tests: what the test program links instead of calc; options:
		// its link options (both name test_only, which it defines).
		tests, options string
	}{
		{name: "c clean", lang: "C", cmd: build},
		{name: "c clean, test directory not built", lang: "C", cmd: build, file: "tests/extra/more.c"},
		{name: "c++ clean, own selection", lang: "CXX", cmd: "mkdir -p build\ncd build && cmake .. && make && ctest -R adds --output-on-failure -E nothing"},
		{name: "emulator exits 0", lang: "C", top: "set(CMAKE_CROSSCOMPILING_EMULATOR true)\n", cmd: build, reasons: 1},
		{name: "c clean, a test main library", lang: "C", cmd: build, testMain: true},
		{name: "c++ clean with a shared library and a test main library", lang: "CXX", cmd: build, shared: true, testMain: true},
		{name: "constructor exits 0", lang: "C", cmd: build, reasons: 1, append: map[string]string{"calc.c": quitCtor}},
		{name: "c++ constructor exits 0, test main library", lang: "CXX", cmd: build, reasons: 1, testMain: true,
			append: map[string]string{"calc.cpp": quitCtor}},
		{name: "a shared library's constructor exits 0", lang: "C", cmd: build, reasons: 1, shared: true, append: map[string]string{"calc.c": quitCtor}},
		{name: "c clean, two static libraries define one symbol", lang: "C", cmd: build, dups: "two",
			note: "links 2 of the project's 3 static libraries whole; --whole-archive fails with libdupb.a"},
		{name: "constructor exits 0, two static libraries define one symbol", lang: "C", cmd: build, dups: "two", reasons: 1,
			note: "links 2 of the project's 3", append: map[string]string{"calc.c": quitCtor}},
		{name: "c clean with a static library that defines one symbol twice", lang: "C", cmd: build, dups: "one", shared: true,
			note: "none of its 1 static ones whole (--whole-archive fails with each: libdups.a)"},
		{name: "a shared library's constructor exits 0 beside a static library that defines one symbol twice", lang: "C", cmd: build,
			dups: "one", shared: true, reasons: 1, note: "none of its 1 static ones whole", append: map[string]string{"calc.c": quitCtor}},
		{name: "c clean, the test program's link libraries fail the canary's link", lang: "C", cmd: build, tests: "calc -Wl,--require-defined=test_only",
			note: "links none of the project's libraries (its links"},
		{name: "c clean, the test program's link options fail the canary's link", lang: "C", cmd: build, options: "-Wl,--require-defined=test_only",
			note: "links none of the project's libraries and none of its linker options"},
		{name: "emulator exits 0, the canary linked alone", lang: "C", cmd: build, tests: "calc -Wl,--require-defined=test_only", reasons: 1,
			top: "set(CMAKE_CROSSCOMPILING_EMULATOR true)\n", note: "links none of the project's libraries (its links"},
		{name: "entry point from the library's link options", lang: "C", cmd: build, reasons: 1, append: map[string]string{
			"calc.c":         "#include <unistd.h>\n\nvoid calc_start(void) { _exit(0); }\n",
			"CMakeLists.txt": "target_link_options(calc INTERFACE -Wl,-e,calc_start)\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := ctestProject(tc.lang, tc.top)
			files["tests/extra/CMakeLists.txt"] = "add_executable(more more.c)\n"
			files["tests/extra/more.c"] = "int main(void) { return 0; }\n"
			ext := map[string]string{"C": "c", "CXX": "cpp"}[tc.lang]
			if tc.shared {
				files["CMakeLists.txt"] = strings.Replace(files["CMakeLists.txt"], "add_library(calc calc", "add_library(calc SHARED calc", 1)
			}
			if tc.testMain {
				// As GoogleTest's gtest_main: the library's main runs what
				// each test program defines.
				files["tests/main."+ext] = "int test_body(void);\n\nint main(void) { return test_body(); }\n"
				files["tests/add_test."+ext] = "#include \"../calc.h\"\n\nint test_body(void) { return add(2, 3) == 5 ? 0 : 1; }\n"
				files["tests/CMakeLists.txt"] = "add_library(testmain STATIC main." + ext + ")\ntarget_link_libraries(testmain PUBLIC calc)\n" +
					"add_executable(add_test add_test." + ext + ")\ntarget_link_libraries(add_test testmain)\nadd_test(NAME adds COMMAND add_test)\n"
			}
			if tc.dups != "" {
				files["dupa.c"] = "int dup = 1;\n\nint dupa(void) { return dup; }\n"
				files["dupb.c"] = "__thread int dup = 2;\n\nint dupb(void) { return dup; }\n"
				libs := map[string]string{"two": "add_library(dupa dupa.c)\nadd_library(dupb dupb.c)\n",
					"one": "add_library(dups STATIC dupa.c dupb.c)\n"}[tc.dups]
				files["CMakeLists.txt"] = strings.Replace(files["CMakeLists.txt"], "add_subdirectory(tests)", libs+"add_subdirectory(tests)", 1)
				link := map[string]string{"two": "calc dupa dupb", "one": "calc dups"}[tc.dups]
				files["tests/CMakeLists.txt"] = strings.Replace(files["tests/CMakeLists.txt"], "target_link_libraries(add_test calc)",
					"target_link_libraries(add_test "+link+")", 1)
				files["tests/add_test.c"] = "#include \"../calc.h\"\n\nint dupa(void);\n\nint main(void) { return add(2, 3) == 5 && dupa() == 1 ? 0 : 1; }\n"
			}
			if tc.tests != "" || tc.options != "" {
				files["tests/add_test.c"] += "\nint test_only(void) { return 0; }\n"
			}
			if tc.tests != "" {
				files["tests/CMakeLists.txt"] = strings.Replace(files["tests/CMakeLists.txt"], "target_link_libraries(add_test calc)",
					"target_link_libraries(add_test "+tc.tests+")", 1)
			}
			if tc.options != "" {
				files["tests/CMakeLists.txt"] += "\ntarget_link_options(add_test PRIVATE " + tc.options + ")\n"
			}
			writeTree(t, dir, files)
			for f, body := range tc.append {
				p := filepath.Join(dir, f)
				old, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, append(old, body...), 0o644); err != nil {
					t.Fatal(err)
				}
				files[f] = string(old) + body
			}
			patched := []string{"tests/add_test.c", "tests/add_test.cpp"}
			if tc.file != "" {
				patched = []string{tc.file}
			}
			c := integrity.NewCanary(tc.cmd, patched)
			if !c.Active() {
				t.Fatalf("not active: %+v", c)
			}
			for _, n := range []string{c.Pass, c.Fail, c.File} {
				if strings.Contains(strings.ToLower(n), "msb") || strings.Contains(n, c.Token) {
					t.Errorf("name %q", n)
				}
			}
			log, out := runCanary(t, c, dir)
			if note := c.Skipped(out); note != "" {
				t.Fatalf("skipped: %s\n%s", note, log)
			}
			for _, fw := range []string{multiswe.FrameworkCTestCatch2, multiswe.FrameworkCTestFmt} {
				statuses := frameworkStatuses(t, fw, out)
				if statuses[c.Pass] != "PASSED" {
					t.Errorf("%s: passing canary %q not passed: %v\n%s", fw, c.Pass, statuses, out)
				}
				if got := c.Judge(statuses, true); len(got) != tc.reasons {
					t.Errorf("%s: reasons %q, want %d; statuses %v; log:\n%s", fw, got, tc.reasons, statuses, log)
				}
			}
			switch note := c.LinkNote(out); {
			case tc.note == "" && note != "":
				t.Errorf("link note %q, want none; log:\n%s", note, log)
			case tc.note != "" && !strings.Contains(note, tc.note):
				t.Errorf("link note %q, want one with %q; log:\n%s", note, tc.note, log)
			}
			for _, f := range []string{"CMakeLists.txt", "tests/CMakeLists.txt", "tests/extra/CMakeLists.txt"} {
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || string(got) != files[f] {
					t.Errorf("%s not put back (%v):\n%s", f, err, got)
				}
			}
		})
	}
}
