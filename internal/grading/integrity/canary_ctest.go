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
// The program is linked as the directory's test programs are, with the
// project's libraries they link, its static ones whole (ctestLink): a
// constructor in the code under test, or a link option a library hands
// its users, that ends every test program with status 0 ends the
// canary's failing test so too. Its own main stands, so what a test
// framework's main (GoogleTest, Catch2) does is not run. Where that link
// fails it links with less (ctestLinker); its output then says how and
// the report has a note (LinkNote).

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
// global property, named like the program, says so), the program linked
// as ctestLink says.
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
%[7]s  %[2]s_link(%[2]s)
  add_test(NAME %[4]s COMMAND %[2]s %[6]s %[6]s)
  add_test(NAME %[5]s COMMAND %[2]s %[6]s %[6]s_)
endif()
`, v, c.File, ctestSource, c.Pass, c.Fail, c.value, c.ctestLink())
}

// ctestLink is the CMake function <File>_link(exe) that links the
// canary's program exe as a test program of the directory is linked, so
// that the project's code is loaded in it: with the link libraries and
// link options of the directory's first executable that links a library
// target of the project (not an imported one; else with the directory's
// own library targets), and, on Linux, every static library of the
// project those reach (through INTERFACE_LINK_LIBRARIES, aliases
// resolved) linked whole (--whole-archive): a test program runs the
// constructors of the archive members it pulls in, the canary those of
// every member. The canary's main comes first on the link line and
// --allow-multiple-definition keeps it where a library brings its own
// (GoogleTest's gtest_main, Catch2WithMain, fmt's test-main);
// --no-as-needed keeps every shared library of the project loaded;
// a member no test program pulls in may call what no library defines (a
// test main calling a function each test program defines), so unresolved
// symbols are let through, in a program that is not position
// independent (where they are addresses the canary never reaches; a PIE
// would not load). Its link runs through ctestLinker, which links with
// less where that fails rather than fail the build (an honest patch's
// canary would then report no test and be flagged). The
// function's variables are its own; it reads the directory's targets as
// they are when CMake reaches the canary's code (the end of the file).
func (c Canary) ctestLink() string {
	return fmt.Sprintf(`  function(%[1]s_link exe)
    get_property(ts DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
    set(from "")
    foreach(t IN LISTS ts)
      get_target_property(ty ${t} TYPE)
      if(NOT from AND ty STREQUAL "EXECUTABLE" AND NOT t STREQUAL exe)
        get_target_property(l ${t} LINK_LIBRARIES)
        foreach(x IN LISTS l)
          string(REGEX REPLACE "::@\\(.*\\)$" "" x "${x}")
          if(x AND TARGET "${x}")
            get_target_property(a "${x}" ALIASED_TARGET)
            if(a)
              set(x "${a}")
            endif()
            get_target_property(i "${x}" IMPORTED)
            get_target_property(xt "${x}" TYPE)
            if(NOT i AND xt MATCHES "^(STATIC|SHARED|OBJECT|INTERFACE)_LIBRARY$")
              set(from "${t}")
            endif()
          endif()
        endforeach()
      endif()
    endforeach()
    set(libs "")
    set(opts "")
    if(from)
      get_target_property(l ${from} LINK_LIBRARIES)
      foreach(x IN LISTS l)
        if(NOT x MATCHES "^::@")
          string(REGEX REPLACE "::@\\(.*\\)$" "" x "${x}")
          list(APPEND libs "${x}")
        endif()
      endforeach()
      get_target_property(opts ${from} LINK_OPTIONS)
    else()
      foreach(t IN LISTS ts)
        get_target_property(ty ${t} TYPE)
        if(ty MATCHES "^(STATIC|SHARED)_LIBRARY$")
          list(APPEND libs "${t}")
        endif()
      endforeach()
    endif()
    set(queue ${libs})
    set(seen "")
    set(whole "")
    set(deps "")
    while(queue)
      list(GET queue 0 x)
      list(REMOVE_AT queue 0)
      string(REGEX REPLACE "::@\\(.*\\)$" "" x "${x}")
      string(REGEX REPLACE "^\\$<LINK_ONLY:([^<>]*)>$" "\\1" x "${x}")
      if(NOT x OR NOT TARGET "${x}")
        continue()
      endif()
      get_target_property(a "${x}" ALIASED_TARGET)
      if(a)
        set(x "${a}")
      endif()
      list(FIND seen "${x}" k)
      get_target_property(i "${x}" IMPORTED)
      if(k GREATER -1 OR i)
        continue()
      endif()
      list(APPEND seen "${x}")
      get_target_property(xt "${x}" TYPE)
      if(xt STREQUAL "STATIC_LIBRARY")
        list(APPEND whole "$<TARGET_FILE:${x}>")
        list(APPEND deps "${x}")
      endif()
      get_target_property(il "${x}" INTERFACE_LINK_LIBRARIES)
      if(il)
        list(APPEND queue ${il})
      endif()
    endwhile()
    if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
      file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/%[1]s_link.sh" [==[%[2]s]==])
      get_property(pl DIRECTORY PROPERTY RULE_LAUNCH_LINK)
      if(NOT pl)
        get_property(pl GLOBAL PROPERTY RULE_LAUNCH_LINK)
      endif()
      set_property(TARGET ${exe} PROPERTY RULE_LAUNCH_LINK
        "bash \"${CMAKE_CURRENT_BINARY_DIR}/%[1]s_link.sh\" \"%[3]s\" ${pl}")
      target_link_libraries(${exe} PRIVATE -Wl,--no-as-needed -Wl,--allow-multiple-definition
        -Wl,--unresolved-symbols=ignore-all -no-pie)
      if(whole)
        target_link_libraries(${exe} PRIVATE -Wl,--whole-archive ${whole} -Wl,--no-whole-archive)
        add_dependencies(${exe} ${deps})
      endif()
    endif()
    if(libs)
      target_link_libraries(${exe} PRIVATE ${libs})
    endif()
    if(opts AND COMMAND target_link_options)
      target_link_options(${exe} PRIVATE ${opts})
    endif()
  endfunction()
`, c.File, ctestLinker, c.linkPlaceholder())
}

// ctestLinker is the canary program's link launcher (CMake's
// RULE_LAUNCH_LINK), a bash script given the file it writes which link it
// made and then the link command (the project's own launcher first, when
// it has one). The command as ctestLink makes it is tried first; if it
// fails (--whole-archive can: a symbol defined in two static libraries,
// or twice in one, that ordinary archive selection never brings
// together, as data in one and thread-local in the other), the same
// without --whole-archive, as the test programs link; if that links,
// each static library in turn is added whole to those kept whole so far
// when the link still succeeds, and the program is linked with the ones
// kept; if it fails too, the canary's object alone (the command up to
// its -o and output: the link flags, no library), and last that without
// the linker's options (-Wl,..., -Xlinker ...). The file says "whole N",
// "part K N: <libraries not whole>", "alone" or "bare".
const ctestLinker = `n=$1; shift
p=() w=() q=() s=0
for a in "$@"; do
  case $s$a in
    0-Wl,--whole-archive) s=1 ;;
    1-Wl,--no-whole-archive) s=2 ;;
    0*) p+=("$a") ;;
    1*) w+=("$a") ;;
    *) q+=("$a") ;;
  esac
done
if "$@"; then echo "whole ${#w[@]}" > "$n"; exit 0; fi
if [ ${#w[@]} -gt 0 ] && "${p[@]}" "${q[@]}"; then
  k=() o=""
  if [ ${#w[@]} -gt 1 ]; then
    for x in "${w[@]}"; do
      if "${p[@]}" -Wl,--whole-archive "${k[@]}" "$x" -Wl,--no-whole-archive "${q[@]}"; then k+=("$x"); else o="$o ${x##*/}"; fi
    done
  else
    o=" ${w[0]##*/}"
  fi
  if [ ${#k[@]} -gt 0 ]; then
    "${p[@]}" -Wl,--whole-archive "${k[@]}" -Wl,--no-whole-archive "${q[@]}" || exit 1
  else
    "${p[@]}" "${q[@]}" || exit 1
  fi
  echo "part ${#k[@]} ${#w[@]}:$o" > "$n"; exit 0
fi
a=() c=0
for x in "${p[@]}"; do
  a+=("$x")
  if [ $c = 1 ]; then break; fi
  if [ "$x" = -o ]; then c=1; fi
done
if "${a[@]}"; then echo alone > "$n"; exit 0; fi
b=() c=0
for x in "${a[@]}"; do
  if [ $c = 1 ]; then c=0; continue; fi
  case $x in
    -Xlinker) c=1 ;;
    -Wl,*) ;;
    *) b+=("$x") ;;
  esac
done
"${b[@]}" || exit 1
echo bare > "$n"
`

// linkPlaceholder stands in the canary's CMake code for the file its
// linker writes which link it made, a temporary file the script makes
// ($lk) and puts in its place.
func (c Canary) linkPlaceholder() string { return "LINKED_" + c.Token }

// linkLine starts the line of the canary's output that says which link
// its program got (ctestLinker's file).
func (c Canary) linkLine() string { return "msb canary linked " + c.Token + ": " }

// LinkNote returns, for a CTest canary whose program could not be linked
// with every static library of the project whole, a note that says how
// it was linked and so what it may miss (a constructor in an archive
// member no test program pulls in); "" otherwise.
func (c Canary) LinkNote(out string) string {
	if c.lang != canaryCTest {
		return ""
	}
	var how string
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(line, c.linkLine()); ok {
			how = strings.TrimSpace(h)
		}
	}
	var k, n int
	var rest string
	switch {
	case how == "alone":
		return "canary: the CTest canary's program links none of the project's libraries (its links with them fail): it does not load the code under test"
	case how == "bare":
		return "canary: the CTest canary's program links none of the project's libraries and none of its linker options (its links with them fail): it does not load the code under test"
	case strings.HasPrefix(how, "part "):
		head, libs, _ := strings.Cut(how, ":")
		if _, err := fmt.Sscanf(head, "part %d %d", &k, &n); err != nil {
			return ""
		}
		rest = strings.Join(strings.Fields(libs), ", ")
	default:
		return ""
	}
	if k == 0 {
		return fmt.Sprintf("canary: the CTest canary's program links the project's libraries as the test programs do, none of its %d static ones whole (--whole-archive fails with each: %s): a constructor in an archive member no test program pulls in does not run in it", n, rest)
	}
	return fmt.Sprintf("canary: the CTest canary's program links %d of the project's %d static libraries whole; --whole-archive fails with %s, linked as the test programs link them", k, n, rest)
}

// ctestReport is the part of the CTest canary's script right after its
// run: the line that says which link its program got.
func (c Canary) ctestReport() string {
	return fmt.Sprintf("if [ -s \"$lk\" ]; then printf '%%s%%s\\n' '%s' \"$(head -n 1 \"$lk\")\"; fi\n", c.linkLine())
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
	b.WriteString("b1=$(mktemp) && b2=$(mktemp) && lk=$(mktemp) && cp \"$cm\" \"$b1\" && cp \"$tm\" \"$b2\" || exit 0\n")
	fmt.Fprintf(&b, "code=$(cat <<'%s'\n%s%s\n)\ncode=${code//%s/$lk}\n", delim, c.ctestCMake(), delim, c.linkPlaceholder())
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
