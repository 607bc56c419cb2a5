package envcache

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// TestFindToolchain finds the host's go through PATH (its GOROOT, its
// version) and through MSB_TOOLCHAIN_GO, and refuses what is not there
// with ErrNoToolchain naming the variable to set.
func TestFindToolchain(t *testing.T) {
	goExe, err := exec.LookPath("go")
	if err != nil {
		privtest.Skip(t, "no go on PATH: %v", err)
	}
	out, err := exec.Command(goExe, "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	goroot := strings.TrimSpace(string(out))
	ctx := context.Background()
	for name, search := range map[string]ToolchainSearch{
		"path":     {Path: []string{filepath.Dir(goExe)}},
		"override": ToolchainSearchFromEnv(func(k string) string { return map[string]string{"MSB_TOOLCHAIN_GO": goroot}[k] }),
	} {
		tc, err := findToolchain(ctx, "go", search)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tc.Dir != goroot || !strings.HasPrefix(tc.Version, "go version go") {
			t.Errorf("%s: %+v, want dir %s", name, tc, goroot)
		}
	}
	empty := t.TempDir()
	for name, tc := range map[string]struct {
		tool   string
		search ToolchainSearch
		want   string
	}{
		"not on PATH":        {"go", ToolchainSearch{Path: []string{empty}}, "set MSB_TOOLCHAIN_GO"},
		"override, no bin":   {"rust", ToolchainSearch{Dirs: map[string]string{"rust": empty}}, "MSB_TOOLCHAIN_RUST=" + empty + " has no bin/rustc"},
		"unknown toolchain":  {"zig", ToolchainSearch{}, `"zig" is no toolchain`},
		"override, not java": {"java", ToolchainSearch{Dirs: map[string]string{"java": goroot}}, "has no bin/java"},
	} {
		_, err := findToolchain(ctx, tc.tool, tc.search)
		if !errors.Is(err, ErrNoToolchain) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrNoToolchain naming %q", name, err, tc.want)
		}
	}
	for _, n := range spec.ToolchainNames {
		if _, ok := toolchainKinds[n]; !ok {
			t.Errorf("spec.ToolchainNames has %q, which envcache cannot find", n)
		}
	}
}

// TestPlaceToolchain: on the host base a toolchain under the host's dirs
// is seen where it is and one elsewhere (rustup's, in a home) is bound
// read-only under ToolchainsDir, as is any but the host's Debian packages
// on another base; its bin comes first on PATH, next to the dependency
// caches' fixed paths.
func TestPlaceToolchain(t *testing.T) {
	c := &Cache{}
	host := baseInfo{host: true}
	goTC, _ := c.placeToolchain(&Toolchain{Name: "go", Dir: "/usr/local/go", Version: "go1"}, host)
	rust, _ := c.placeToolchain(&Toolchain{Name: "rust", Dir: "/root/.rustup/toolchains/stable", Version: "rustc 1"}, host)
	if goTC.Bind || goTC.Path != "/usr/local/go" || !rust.Bind || rust.Path != ToolchainsDir+"/rust" {
		t.Fatalf("go %+v, rust %+v", goTC, rust)
	}
	// On a Debian base the host's /usr/local/go is bound, and a Debian
	// package of the host's is the base's business (system_packages).
	debian := baseInfo{keyStr: "debian"}
	if tc, err := c.placeToolchain(&Toolchain{Name: "go", Dir: "/usr/local/go"}, debian); err != nil || !tc.Bind || tc.Path != ToolchainsDir+"/go" {
		t.Fatalf("go on a Debian base: %+v, %v", tc, err)
	}
	if _, err := c.placeToolchain(&Toolchain{Name: "java", Dir: "/usr/lib/jvm/java-17"}, debian); !errors.Is(err, ErrNoToolchain) || !strings.Contains(err.Error(), "system_packages") {
		t.Fatalf("host JDK on a Debian base without one: err = %v", err)
	}
	binds := toolchainBinds([]*Toolchain{goTC, rust})
	if len(binds) != 1 || binds[0].Source != rust.Dir || binds[0].Target != rust.Path || !binds[0].ReadOnly {
		t.Fatalf("binds %+v", binds)
	}
	env := toolchainEnv([]*Toolchain{goTC, rust, {Name: "java", Path: "/usr/lib/jvm/java-17"}})
	if !strings.HasPrefix(env[0], "PATH=/usr/local/go/bin:"+ToolchainsDir+"/rust/bin:/usr/lib/jvm/java-17/bin:") ||
		!slices.Contains(env, "JAVA_HOME=/usr/lib/jvm/java-17") || !slices.Contains(env, "MALLOC_ARENA_MAX=2") || !slices.Contains(env, "CARGO_HOME=/opt/msb/deps/cargo") {
		t.Fatalf("env %q", env)
	}
	// a Java runtime beside a JDK: JRE_HOME, JAVA_HOME stays the JDK's;
	// alone, it is JAVA_HOME too; a fetched one is bound on any base
	jre, _ := c.placeToolchain(&Toolchain{Name: "jre", Dir: "/cache/layers/x/tree", Fetched: true}, host)
	if !jre.Bind || jre.Path != ToolchainsDir+"/jre" {
		t.Fatalf("fetched jre: %+v", jre)
	}
	env = toolchainEnv([]*Toolchain{{Name: "java", Path: "/usr/lib/jvm/java-17"}, jre})
	if !slices.Contains(env, "JRE_HOME="+ToolchainsDir+"/jre") || !slices.Contains(env, "JAVA_HOME=/usr/lib/jvm/java-17") || slices.Contains(env, "JAVA_HOME="+ToolchainsDir+"/jre") {
		t.Fatalf("JDK and JRE env %q", env)
	}
	if env = toolchainEnv([]*Toolchain{jre}); !slices.Contains(env, "JAVA_HOME="+ToolchainsDir+"/jre") || !slices.Contains(env, "MALLOC_ARENA_MAX=2") {
		t.Fatalf("JRE alone env %q", env)
	}
	// a fetched Node trusts the system's CAs (a proxy's, here), the host's needs nothing
	if env = toolchainEnv([]*Toolchain{{Name: "node", Path: ToolchainsDir + "/node", Fetched: true}}); !slices.Contains(env, "NODE_EXTRA_CA_CERTS="+systemCABundle) {
		t.Fatalf("fetched node env %q", env)
	}
	if env = toolchainEnv([]*Toolchain{{Name: "node", Path: "/usr"}}); slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "NODE_EXTRA_CA_CERTS=") }) {
		t.Fatalf("host node env %q", env)
	}
	sp := spec.Spec{Language: spec.LangGo}
	if toolchainKey(sp, []*Toolchain{goTC}, host, "s") == toolchainKey(sp, []*Toolchain{{Name: "go", Dir: "/usr/local/go", Path: "/usr/local/go", Version: "go2"}}, host, "s") {
		t.Fatal("another toolchain version gives the same environment key")
	}
}

// TestRunToolStdoutFirst: a tool's answer is its stdout, whatever it warns
// on stderr (rustc under make -j warns of the jobserver descriptors it was
// not given, which took the place of its sysroot), or its stderr when it
// writes nothing else (java -version).
func TestRunToolStdoutFirst(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"warns":  "echo 'warning: failed to connect to jobserver' >&2; echo /opt/rust",
		"stderr": "echo 'openjdk version \"17\"' >&2",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if out, err := runTool(ctx, filepath.Join(dir, "warns")); err != nil || out != "/opt/rust\n" {
		t.Errorf("warns: %q, %v; want its stdout alone", out, err)
	}
	if out, err := runTool(ctx, filepath.Join(dir, "stderr")); err != nil || !strings.HasPrefix(out, "openjdk version") {
		t.Errorf("stderr: %q, %v; want its stderr", out, err)
	}
}
