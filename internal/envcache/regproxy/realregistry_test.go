package regproxy

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// unreachable is an upstream no registry answers at (port 1 of the
// loopback: the connection is refused).
const unreachable = "http://127.0.0.1:1"

// needReal skips t (fails it under MSB_TEST_STRICT) without tool on PATH
// or when url does not answer.
func needReal(t *testing.T, tool, url string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		privtest.Skip(t, "%s not installed: %v", tool, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		privtest.Skip(t, "registry not reachable: %v", err)
		return
	}
	resp.Body.Close()
}

// run runs a command in dir with env added and returns its output; a
// failure fails t with it.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// proxyAddr starts a proxy on dir with cargo's and Maven's upstreams
// and returns its address.
func proxyAddr(t *testing.T, dir, cargo, maven string) string {
	t.Helper()
	addr, stop, err := (&Proxy{Dir: dir, Cargo: cargo, Maven: maven}).Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// TestCargoThroughProxy builds a generated project using one crate
// (itoa 1.0.11, no dependencies) with cargo reaching crates.io through
// the proxy (CargoConfig, CARGO_HTTP_PROXY), builds it again offline
// from that CARGO_HOME (as a task sandbox does), then from an empty
// CARGO_HOME with the upstream unreachable: the proxy's cache alone.
func TestCargoThroughProxy(t *testing.T) {
	needReal(t, "cargo", "https://index.crates.io/config.json")
	tmp := t.TempDir()
	dl, proj := filepath.Join(tmp, "downloads"), filepath.Join(tmp, "proj")
	writeFiles(t, proj, map[string]string{
		"Cargo.toml":  "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
		"src/main.rs": "fn main() { println!(\"{}\", itoa::Buffer::new().format(42u8)); }\n",
	})
	build := func(home, addr string, extra ...string) {
		t.Helper()
		writeFiles(t, home, map[string]string{"config.toml": CargoConfig})
		env := append([]string{"CARGO_HOME=" + home, "CARGO_TARGET_DIR=" + filepath.Join(tmp, "target"), "CARGO_HTTP_PROXY=http://" + addr,
			"CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse", "CARGO_TERM_COLOR=never"}, extra...)
		if got := run(t, proj, env, "cargo", "run", "-q"); got != "42\n" {
			t.Fatalf("cargo run: %q", got)
		}
	}

	home := filepath.Join(tmp, "home")
	build(home, proxyAddr(t, dl, "https://index.crates.io", ""))
	for _, p := range []string{filepath.Join(dl, CargoIndexDir, "it/oa/itoa"), CratePath(dl, "itoa", "1.0.11")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the proxy did not keep it: %v", err)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(home, "registry/index", CargoHost+"-*")); len(names) != 1 {
		t.Errorf("cargo's index dir is not named after %s: %v", CargoHost, names)
	}

	offline := proxyAddr(t, dl, unreachable, "")
	os.RemoveAll(filepath.Join(tmp, "target"))
	build(home, offline, "CARGO_NET_OFFLINE=true")
	os.RemoveAll(filepath.Join(tmp, "target"))
	build(filepath.Join(tmp, "home2"), offline)
}

// mavenProject is a project whose compile needs junit 4.13.2 (and
// hamcrest-core 1.3) and Maven's compiler and resources plugins.
var mavenProject = map[string]string{
	"pom.xml": `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId><artifactId>proj</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.source>8</maven.compiler.source><maven.compiler.target>8</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13.2</version></dependency>
  </dependencies>
</project>
`,
	"src/main/java/example/Check.java": "package example;\npublic class Check { public static void ok() { org.junit.Assert.assertTrue(true); } }\n",
}

// TestMavenThroughProxy compiles a project with mvn through the proxy's
// mirror of Maven Central (MavenSettings), compiles it again offline
// (-o) from that local repository without the mirror (as an evaluation
// does: the mirror's id is central's), then into an empty local
// repository with the upstream unreachable: the proxy's cache alone.
func TestMavenThroughProxy(t *testing.T) {
	needReal(t, "mvn", "https://repo1.maven.org/maven2/junit/junit/4.13.2/junit-4.13.2.pom.sha1")
	tmp := t.TempDir()
	dl, proj := filepath.Join(tmp, "downloads"), filepath.Join(tmp, "proj")
	writeFiles(t, proj, mavenProject)
	mvn := func(repo string, args ...string) {
		t.Helper()
		os.RemoveAll(filepath.Join(proj, "target"))
		args = append([]string{"-B", "-q", "-Dstyle.color=never", "-Dmaven.repo.local=" + repo}, args...)
		run(t, proj, []string{"MAVEN_OPTS="}, "mvn", append(args, "compile")...)
		if _, err := os.Stat(filepath.Join(proj, "target/classes/example/Check.class")); err != nil {
			t.Fatalf("mvn compiled nothing: %v", err)
		}
	}
	settings := func(addr string) string {
		p := filepath.Join(tmp, "settings-"+strings.ReplaceAll(addr, ":", "-")+".xml")
		writeFiles(t, tmp, map[string]string{filepath.Base(p): MavenSettings("http://" + addr + "/maven2/")})
		return p
	}

	repo := filepath.Join(tmp, "m2")
	mvn(repo, "-s", settings(proxyAddr(t, dl, "", "https://repo1.maven.org/maven2")))
	for _, p := range []string{"junit/junit/4.13.2/junit-4.13.2.jar", "junit/junit/4.13.2/junit-4.13.2.jar.sha1", "org/hamcrest/hamcrest-core/1.3/hamcrest-core-1.3.pom"} {
		if _, err := os.Stat(filepath.Join(dl, MavenDir, p)); err != nil {
			t.Errorf("the proxy did not keep it: %v", err)
		}
	}

	writeFiles(t, tmp, map[string]string{"no-mirror.xml": "<settings/>\n"})
	mvn(repo, "-o", "-s", filepath.Join(tmp, "no-mirror.xml"))
	mvn(filepath.Join(tmp, "m2-empty"), "-s", settings(proxyAddr(t, dl, "", unreachable)))
}

// TestGoSumDBThroughProxy builds a module whose go.sum is empty, so go
// verifies its dependency (github.com/google/uuid v1.6.0) against the
// checksum database, which it reaches through the proxy (proxy.golang.org
// serves sum.golang.org's); the proxy keeps the lookup. Then with fresh
// module caches: through the proxy with the upstream unreachable, and
// from the download cache as a file:// proxy with no proxy at all (an
// offline build), each verifying from the kept answers alone.
func TestGoSumDBThroughProxy(t *testing.T) {
	needReal(t, "go", "https://proxy.golang.org/sumdb/sum.golang.org/supported")
	tmp := t.TempDir()
	dl, proj := filepath.Join(tmp, "downloads"), filepath.Join(tmp, "proj")
	writeFiles(t, proj, map[string]string{
		"go.mod":  "module example.com/proj\n\ngo 1.21\n\nrequire github.com/google/uuid v1.6.0\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/google/uuid\"\n)\n\nfunc main() { fmt.Println(uuid.Nil) }\n",
	})
	build := func(name, goproxy string) {
		t.Helper()
		os.Remove(filepath.Join(proj, "go.sum"))
		home := filepath.Join(tmp, name)
		env := []string{"GOPROXY=" + goproxy, "GOPATH=" + home, "GOMODCACHE=" + filepath.Join(home, "mod"),
			"GOFLAGS=-modcacherw -mod=mod", "GOTOOLCHAIN=local", "GOSUMDB=", "GONOSUMDB=", "GONOSUMCHECK=", "GOPRIVATE=",
			"GONOPROXY=", "GOINSECURE=", "GOWORK=off"}
		if got := run(t, proj, env, "go", "run", "."); !strings.HasSuffix(got, "\n00000000-0000-0000-0000-000000000000\n") {
			t.Fatalf("go run (%s): %q", name, got)
		}
		if b, _ := os.ReadFile(filepath.Join(proj, "go.sum")); !strings.Contains(string(b), "github.com/google/uuid v1.6.0 h1:") {
			t.Fatalf("go.sum (%s) lacks the module's hash:\n%s", name, b)
		}
	}

	up := &Proxy{Dir: dl, Go: "https://proxy.golang.org"}
	build("first", start(t, up)+"/go")
	for _, p := range []string{"supported", "lookup/github.com/google/uuid@v1.6.0", "tile"} {
		if _, err := os.Stat(filepath.Join(dl, GoDir, "sumdb/sum.golang.org", p)); err != nil {
			t.Errorf("the proxy did not keep the checksum database's answer: %v", err)
		}
	}
	build("upstream-gone", start(t, &Proxy{Dir: dl, Go: unreachable})+"/go")
	build("offline", "file://"+filepath.Join(dl, GoDir)+",off")
}
