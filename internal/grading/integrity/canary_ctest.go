package integrity

import (
	"fmt"
	"strings"
)

// The CTest canary: two CTest tests named with drawn words (DrawNames),
// one that must pass and one that must fail, added by CMake code appended
// to the CMakeLists.txt nearest the first C or C++ file of the test patch
// (the directory whose tests the patch touches; the topmost CMakeLists.txt
// above it when the build does not add that directory), so that they are
// defined, built and run as that directory's own tests are: with its
// directory's compile and link settings, its test properties (a
// CROSSCOMPILING_EMULATOR, say), under the same add_test and the same
// ctest. Their program, written by that code into the build tree (never
// into the repository), compares its two arguments: the passing test
// gives it a drawn word twice, the failing one the word and the word with
// a suffix. The instance's own test command then configures and builds
// as in the harness's run, its output discarded (cmake's configure
// checks read as tests by Catch2's parser), and its ctest, a shell
// function here, runs the harness's ctest with the command's own options
// but its test selection (-R, -E, -L ...) replaced by the two tests. The
// CMakeLists.txt is put back afterwards.
//
// What it does not load: the project's own libraries and test framework
// (GoogleTest, Catch2), whose main would clash with the canary's, so a
// constructor in the code under test that ends every test program early
// is not seen by it.

const canaryCTest = "ctest"

// ctestSource is the canary program, valid C and C++.
const ctestSource = `#include <string.h>

int main(int argc, char **argv) {
    return argc < 3 || strcmp(argv[1], argv[2]) != 0;
}
`

var ctestFile = lazyRegexp(`(^|/)CMakeLists\.txt$|\.(c|cc|cpp|cxx|c\+\+|h|hh|hpp|hxx|ipp|inl)$`)

// ctestCanary draws the CTest canary for testCmd.
func ctestCanary(testCmd string, testFiles []string) Canary {
	var cands []string
	for _, f := range testFiles {
		if ctestFile().MatchString(f) && safePath(f) {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		return Canary{Note: "canary skipped: the test patch touches no C, C++ or CMakeLists.txt file"}
	}
	names := DrawNames(4, 3)
	c := Canary{Token: token(), lang: canaryCTest, candidates: cands, value: names[3].Snake()}
	c.Pass, c.Fail, c.File = names[0].Snake(), names[1].Snake(), names[2].Snake()
	c.Command = "{\n" + strings.TrimSpace(testCmd) + "\n} >/dev/null 2>&1 </dev/null\ncat \"$b1\" > \"$cm\"; cat \"$b2\" > \"$tm\""
	return c
}

// ctestCMake is the CMake code appended to a CMakeLists.txt: it defines
// the canary's program and tests unless CMake has read it before (a
// global property, named like the program, says so).
func (c Canary) ctestCMake() string {
	v := c.File + "_src"
	return fmt.Sprintf(`
get_property(%[1]s GLOBAL PROPERTY %[2]s)
if(NOT %[1]s)
  set_property(GLOBAL PROPERTY %[2]s 1)
  if(CMAKE_CXX_COMPILER_LOADED)
    set(%[1]s "${CMAKE_CURRENT_BINARY_DIR}/%[2]s.cpp")
  else()
    set(%[1]s "${CMAKE_CURRENT_BINARY_DIR}/%[2]s.c")
  endif()
  file(WRITE "${%[1]s}" [==[%[3]s]==])
  add_executable(%[2]s "${%[1]s}")
  add_test(NAME %[4]s COMMAND %[2]s %[6]s %[6]s)
  add_test(NAME %[5]s COMMAND %[2]s %[6]s %[6]s_)
endif()
`, v, c.File, ctestSource, c.Pass, c.Fail, c.value)
}

// ctestPlace is the part of the script that appends the canary's CMake
// code to the CMakeLists.txt nearest the file $f ($cm, kept in $b1) and,
// for a directory the build does not add, to the topmost one above it
// ($tm, kept in $b2; the code defines the tests once, where CMake reads
// it first), and defines ctest as a function that runs the real one on
// the two tests, its output to the script's (descriptor 3), the test
// command's own output going nowhere.
func (c Canary) ctestPlace() string {
	var b strings.Builder
	delim := "MSB_CANARY_" + c.Token
	b.WriteString("d=$(dirname \"$f\")\nwhile [ \"$d\" != . ] && [ \"$d\" != / ] && [ ! -f \"$d/CMakeLists.txt\" ]; do d=$(dirname \"$d\"); done\n")
	fmt.Fprintf(&b, "if [ ! -f \"$d/CMakeLists.txt\" ]; then echo '%sno CMakeLists.txt holds the test file'; exit 0; fi\n", c.skipLine())
	b.WriteString("t=$d; x=$d\nwhile [ \"$x\" != . ] && [ \"$x\" != / ]; do x=$(dirname \"$x\"); if [ -f \"$x/CMakeLists.txt\" ]; then t=$x; fi; done\n")
	b.WriteString("cm=$(pwd)/$d/CMakeLists.txt; tm=$(pwd)/$t/CMakeLists.txt\n")
	b.WriteString("b1=$(mktemp) && b2=$(mktemp) && cp \"$cm\" \"$b1\" && cp \"$tm\" \"$b2\" || exit 0\n")
	fmt.Fprintf(&b, "code=$(cat <<'%s'\n%s%s\n)\n", delim, c.ctestCMake(), delim)
	b.WriteString("printf '\\n%s\\n' \"$code\" >> \"$cm\"\n")
	b.WriteString("if [ \"$t\" != \"$d\" ]; then printf '\\n%s\\n' \"$code\" >> \"$tm\"; fi\n")
	b.WriteString("exec 3>&1\n")
	fmt.Fprintf(&b, `ctest() {
  local a=() skip=0 x
  for x in "$@"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    case $x in
      -R|-E|-L|-LE|-I|-U|-N|-FA|-FS|-FC|--tests-regex|--exclude-regex|--label-regex|--label-exclude|--tests-information|--tests-from-file|--exclude-from-file|--exclude-fixture|--exclude-fixture-setup|--exclude-fixture-cleanup|--union|--show-only|--rerun-failed)
        case $x in -U|-N|--union|--show-only|--rerun-failed) ;; *) skip=1 ;; esac ;;
      -R?*|-E?*|-L?*|-I?*|--tests-regex=*|--exclude-regex=*|--label-regex=*|--label-exclude=*|--tests-information=*|--tests-from-file=*|--exclude-from-file=*|--show-only=*) ;;
      *) a+=("$x") ;;
    esac
  done
  command ctest "${a[@]}" -R '^(%s|%s)$' >&3 2>&3
}
export -f ctest
`, c.Pass, c.Fail)
	return b.String()
}
