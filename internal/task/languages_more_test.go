package task

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/envcache/regproxy"
)

// javaProject: a Maven project with JUnit 4, its plugins pinned, whose
// dependency step (one online `mvn clean test`, as the harness's
// prepare) fills the local repository and whose evaluation runs Maven
// offline; Surefire's "... -- in <class>" lines are read by jackson-core's
// parser. Calc.add subtracts until the fix. Its env caps glibc's malloc
// arenas as the built-in Java specs do: without it Maven's JVM cannot start
// under the RLIMIT_AS of a sandbox without a cgroup (the rootless rerun).
var javaProject = langProject{
	name: "javacalc",
	base: map[string]string{
		".gitignore": "target/\n",
		"pom.xml": `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>msbtest</groupId>
  <artifactId>calc</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>4.13.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><artifactId>maven-clean-plugin</artifactId><version>3.3.2</version></plugin>
      <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
      <plugin><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version></plugin>
    </plugins>
  </build>
</project>
`,
		"src/main/java/calc/Calc.java":    javaCalc("a - b"),
		"src/test/java/calc/MulTest.java": javaTest("MulTest", "mul", "6, Calc.mul(2, 3)"),
	},
	tests: map[string]string{"src/test/java/calc/AddTest.java": javaTest("AddTest", "add", "5, Calc.add(2, 3)")},
	fix:   map[string]string{"src/main/java/calc/Calc.java": javaCalc("a + b")},
	spec: `      language: java
      toolchains: [java, maven]
      env: {MALLOC_ARENA_MAX: "2"}
      install: mvn -B clean test
      test_cmd: mvn -o -B clean test
      log_parser: multiswe/surefire
      directives: none
`,
	p2p: []string{"calc.MulTest"}, f2p: []string{"calc.AddTest"}, testRunFailed: []string{"calc.AddTest"}, built: "BUILD SUCCESS",
}

func javaCalc(add string) string {
	return "package calc;\n\npublic class Calc {\n    public static int add(int a, int b) {\n        return " + add +
		";\n    }\n\n    public static int mul(int a, int b) {\n        return a * b;\n    }\n}\n"
}

func javaTest(class, method, args string) string {
	return "package calc;\n\nimport static org.junit.Assert.assertEquals;\n\nimport org.junit.Test;\n\npublic class " + class +
		" {\n    @Test\n    public void " + method + "() {\n        assertEquals(" + args + ");\n    }\n}\n"
}

// jsProject: an npm package tested with mocha (pinned), installed by the
// dependency step with the build network; the evaluation runs it from
// node_modules with npm offline, read by axios's parser (mocha's spec
// reporter: a failure is named "adds" and, in the summary, "adds:").
var jsProject = langProject{
	name: "jscalc",
	base: map[string]string{
		".gitignore":       "node_modules/\npackage-lock.json\n",
		"package.json":     `{"name": "calc", "version": "1.0.0", "private": true, "scripts": {"test": "mocha"}, "devDependencies": {"mocha": "10.8.2"}}` + "\n",
		"calc.js":          "exports.add = (a, b) => a - b;\nexports.mul = (a, b) => a * b;\n",
		"test/mul.spec.js": "const assert = require('assert');\nconst { mul } = require('../calc');\n\nit('multiplies', () => assert.strictEqual(mul(2, 3), 6));\n",
	},
	tests: map[string]string{"test/add.spec.js": "const assert = require('assert');\nconst { add } = require('../calc');\n\nit('adds', () => assert.strictEqual(add(2, 3), 5));\n"},
	fix:   map[string]string{"calc.js": "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n"},
	spec: `      language: javascript
      toolchains: [node]
      install: npm install --no-audit --no-fund
      test_cmd: npm test -- --reporter spec
      log_parser: multiswe/mocha
      directives: none
`,
	p2p: []string{"multiplies"}, f2p: []string{"adds"}, testRunFailed: []string{"adds", "adds:"}, built: "2 passing",
}

// cppProject: a CMake project whose tests are ctest's, built in build/ by
// the test command as fmt's and Catch2's fix-run does; read by Catch2's
// parser (fmt's does not read ctest's "***Failed <time>" lines).
var cppProject = langProject{
	name: "cppcalc",
	base: map[string]string{
		".gitignore": "build/\n",
		"CMakeLists.txt": `cmake_minimum_required(VERSION 3.10)
project(calc CXX)
enable_testing()
add_library(calc calc.cpp)
foreach(t mul_test add_test)
  if(EXISTS ${CMAKE_SOURCE_DIR}/tests/${t}.cpp)
    add_executable(${t} tests/${t}.cpp)
    target_link_libraries(${t} calc)
    add_test(NAME ${t} COMMAND ${t})
  endif()
endforeach()
`,
		"calc.h":             "int add(int a, int b);\nint mul(int a, int b);\n",
		"calc.cpp":           cppCalc("a - b"),
		"tests/mul_test.cpp": "#include \"../calc.h\"\n\nint main() { return mul(2, 3) == 6 ? 0 : 1; }\n",
	},
	tests: map[string]string{"tests/add_test.cpp": "#include \"../calc.h\"\n\nint main() { return add(2, 3) == 5 ? 0 : 1; }\n"},
	fix:   map[string]string{"calc.cpp": cppCalc("a + b")},
	spec: `      language: cpp
      toolchains: [gcc, cmake, make]
      install: mkdir -p build
      test_cmd: (cd build && cmake .. && cmake --build . && ctest)
      log_parser: multiswe/ctest_catch2
      directives: none
`,
	p2p: []string{"mul_test"}, f2p: []string{"add_test"}, testRunFailed: []string{"add_test"}, built: "100% tests passed",
}

func cppCalc(add string) string {
	return "#include \"calc.h\"\n\nint add(int a, int b) { return " + add + "; }\n\nint mul(int a, int b) { return a * b; }\n"
}

// TestLanguagesMore builds a Maven project, an npm package and a CMake
// project as Multi-SWE-bench rows on the host's toolchains and evaluates
// each with its gold patch (resolved) and an empty patch (not resolved),
// in sandboxes without network. The Maven project's dependency step
// fetches through the registry proxy, which keeps its junit jar.
func TestLanguagesMore(t *testing.T) {
	testLangProjects(t, langEnv(t), javaProject, jsProject, cppProject)
	// Maven fetched through the registry proxy's mirror of Central.
	jar := filepath.Join(gen.Dir(), "cache-languages", "downloads", regproxy.MavenDir, "junit/junit/4.13.2/junit-4.13.2.jar")
	if _, err := os.Stat(jar); err != nil {
		t.Errorf("the registry proxy did not keep javacalc's junit: %v", err)
	}
}
