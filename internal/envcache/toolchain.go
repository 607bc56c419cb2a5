package envcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// ToolchainsDir is where a sandbox sees a toolchain that lies outside the
// base's view: ToolchainsDir/<name>, bound read-only.
const ToolchainsDir = "/opt/msb/toolchains"

// ErrNoToolchain is returned when a toolchain a spec names cannot be found.
var ErrNoToolchain = errors.New("toolchain not found")

// A Toolchain is a host toolchain an environment uses: a directory with
// bin/ (a prefix: a Go GOROOT, a Rust sysroot, a JDK, /usr), where the
// sandbox sees it, and its version, which is part of the environment key.
type Toolchain struct {
	Name string
	// Dir is the toolchain's directory on the host.
	Dir string
	// Path is where a sandbox sees Dir: Dir itself when the base shows
	// it, else ToolchainsDir/<name> (Bind).
	Path string
	Bind bool
	// Version is what the toolchain says of itself (rustc --version,
	// go version, ...); "base" when it comes with a non-host base; for a
	// fetched one, the release, its source and its layer.
	Version string
	// Fetched: Dir is the tree of a toolchain layer of the store
	// (toolchain_fetch.go), always bound.
	Fetched bool
}

// ToolchainSearch is where toolchains are looked for, as the caller's
// environment says (the CLI fills it with ToolchainSearchFromEnv).
type ToolchainSearch struct {
	// Path: dirs searched for the toolchains' programs (PATH); empty for
	// /usr/local/bin, /usr/bin, /bin and /usr/local/go/bin.
	Path []string
	// Dirs: a toolchain's directory by name, given by the user
	// (MSB_TOOLCHAIN_<NAME>), used instead of the search.
	Dirs map[string]string
	// Registries are where toolchains of versions the host lacks come
	// from.
	Registries Registries
}

// ToolchainSearchFromEnv reads PATH and the MSB_TOOLCHAIN_<NAME> overrides
// of every toolchain spec.ToolchainNames has, and the registries
// (GOPROXY, npm_config_registry), through getenv.
func ToolchainSearchFromEnv(getenv func(string) string) ToolchainSearch {
	s := ToolchainSearch{Path: filepath.SplitList(getenv("PATH")), Dirs: map[string]string{}, Registries: registriesFromEnv(getenv)}
	for _, n := range spec.ToolchainNames {
		if d := getenv(ToolchainEnvVar(n)); d != "" {
			s.Dirs[n] = d
		}
	}
	return s
}

// ToolchainEnvVar is the variable that names a toolchain's directory.
func ToolchainEnvVar(name string) string { return "MSB_TOOLCHAIN_" + strings.ToUpper(name) }

// toolchainKind says how to find one toolchain and ask its version.
type toolchainKind struct {
	exe string // the program looked for on the search path and in Dir/bin
	// dirArgs ask exe for its directory (go env GOROOT, rustc --print
	// sysroot); nil: the directory above the real path's bin/.
	dirArgs []string
	// versionArgs ask exe for its version; the output's first line is kept.
	versionArgs []string
}

var toolchainKinds = map[string]toolchainKind{
	"go":     {exe: "go", dirArgs: []string{"env", "GOROOT"}, versionArgs: []string{"version"}},
	"rust":   {exe: "rustc", dirArgs: []string{"--print", "sysroot"}, versionArgs: []string{"--version"}},
	"node":   {exe: "node", versionArgs: []string{"--version"}},
	"java":   {exe: "java", versionArgs: []string{"-version"}},
	"jre":    {exe: "java", versionArgs: []string{"-version"}},
	"maven":  {exe: "mvn", versionArgs: []string{"--version"}},
	"gradle": {exe: "gradle", versionArgs: []string{"--version"}},
	"cmake":  {exe: "cmake", versionArgs: []string{"--version"}},
	"gcc":    {exe: "gcc", versionArgs: []string{"--version"}},
	"clang":  {exe: "clang", versionArgs: []string{"--version"}},
	"make":   {exe: "make", versionArgs: []string{"--version"}},
}

var defaultToolchainPath = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/go/bin"}

// findToolchain finds the toolchain name on the host: the user's
// directory, else its program on the search path (its directory as the
// program says, or the one above the program's real bin/), and asks its
// version.
func findToolchain(ctx context.Context, name string, search ToolchainSearch) (*Toolchain, error) {
	k, ok := toolchainKinds[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is no toolchain msb knows (%s)", ErrNoToolchain, name, strings.Join(spec.ToolchainNames, ", "))
	}
	hint := fmt.Sprintf("install it, put %s on PATH, or set %s to its directory (the one with bin/%s)", k.exe, ToolchainEnvVar(name), k.exe)
	if dir := search.Dirs[name]; dir != "" {
		exe := filepath.Join(dir, "bin", k.exe)
		if !isExec(exe) {
			return nil, fmt.Errorf("%w: %s: %s=%s has no bin/%s", ErrNoToolchain, name, ToolchainEnvVar(name), dir, k.exe)
		}
		return probeToolchain(ctx, name, k, exe, dir)
	}
	path := search.Path
	if len(path) == 0 {
		path = defaultToolchainPath
	}
	for _, d := range path {
		exe := filepath.Join(d, k.exe)
		if !isExec(exe) {
			continue
		}
		dir, err := toolchainDir(ctx, k, exe)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w (%s)", ErrNoToolchain, name, err, hint)
		}
		return probeToolchain(ctx, name, k, filepath.Join(dir, "bin", k.exe), dir)
	}
	return nil, fmt.Errorf("%w: %s: no %s in %s (%s)", ErrNoToolchain, name, k.exe, strings.Join(path, ":"), hint)
}

// toolchainDir is the directory of the toolchain whose program is exe.
func toolchainDir(ctx context.Context, k toolchainKind, exe string) (string, error) {
	if k.dirArgs != nil {
		out, err := runTool(ctx, exe, k.dirArgs...)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(out), nil
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", exe, err)
	}
	if filepath.Base(filepath.Dir(real)) != "bin" {
		return "", fmt.Errorf("%s (%s) is not in a bin/ directory", exe, real)
	}
	return filepath.Dir(filepath.Dir(real)), nil
}

func probeToolchain(ctx context.Context, name string, k toolchainKind, exe, dir string) (*Toolchain, error) {
	out, err := runTool(ctx, exe, k.versionArgs...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoToolchain, name, err)
	}
	v, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return &Toolchain{Name: name, Dir: filepath.Clean(dir), Version: strings.TrimSpace(v)}, nil
}

// runTool runs exe with args (a minute at most) and returns what it
// wrote to stdout, or to stderr when stdout is empty (java -version writes
// there). stdout first: a tool may also warn on stderr (rustc run under
// make -j warns that it cannot reach the jobserver descriptors it was not
// given), which is no part of a path or a version.
func runTool(ctx context.Context, exe string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running %s %s: %w: %s", exe, strings.Join(args, " "), err, tail(errOut.String()+out.String(), 3))
	}
	if strings.TrimSpace(out.String()) == "" {
		return errOut.String(), nil
	}
	return out.String(), nil
}

// placeToolchain says where the sandbox sees tc over base: at its own path
// when the host base shows it, else bound at ToolchainsDir/<name>. On a
// non-host base, a toolchain of the host's Debian packages (under /usr but
// not /usr/local: its files point into the rest of /usr) is not bound: the
// base must have it (system_packages), and its version is the base's.
func (c *Cache) placeToolchain(tc *Toolchain, base baseInfo) (*Toolchain, error) {
	out := *tc
	if tc.Fetched {
		out.Path, out.Bind = filepath.Join(ToolchainsDir, tc.Name), true
		return &out, nil
	}
	if base.host {
		if underAny(tc.Dir, sandbox.DefaultHostDirs) {
			out.Path = tc.Dir
			return &out, nil
		}
	} else if underAny(tc.Dir, []string{"/usr"}) && !underAny(tc.Dir, []string{"/usr/local"}) {
		exe := filepath.Join(tc.Dir, "bin", toolchainKinds[tc.Name].exe)
		if _, ok := c.baseFile(base, exe); !ok {
			return nil, fmt.Errorf("%w: %s: the base has no %s (the host's is a Debian package: add it to the spec's system_packages, or set %s to a toolchain directory outside /usr)",
				ErrNoToolchain, tc.Name, exe, ToolchainEnvVar(tc.Name))
		}
		out.Path, out.Version = tc.Dir, "base"
		return &out, nil
	}
	out.Path, out.Bind = filepath.Join(ToolchainsDir, tc.Name), true
	return &out, nil
}

// underAny reports whether p is one of dirs or below one.
func underAny(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// toolchains resolves the spec's toolchains for base, each found on the
// host, or fetched, once per Cache.
func (c *Cache) toolchains(ctx context.Context, sp spec.Spec, base baseInfo) ([]*Toolchain, error) {
	var out []*Toolchain
	for _, entry := range sp.Toolchains {
		tc, err := c.toolchain(ctx, entry)
		if err != nil {
			return nil, err
		}
		placed, err := c.placeToolchain(tc, base)
		if err != nil {
			return nil, err
		}
		out = append(out, placed)
	}
	return out, nil
}

// toolchain resolves one entry of a spec's toolchains: name is the
// host's; name@version the host's when its version is that one, else the
// stored or fetched one (fetchedToolchain).
func (c *Cache) toolchain(ctx context.Context, entry string) (*Toolchain, error) {
	c.mu.Lock()
	tc := c.toolchainsFound[entry]
	c.mu.Unlock()
	if tc != nil {
		return tc, nil
	}
	name, version := spec.ParseToolchain(entry)
	host, err := c.hostToolchain(ctx, name)
	switch {
	case version == "" && err != nil:
		return nil, err
	case version == "" || err == nil && hostVersionMatches(host.Version, version):
		tc = host
	default:
		if tc, err = c.fetchedToolchain(ctx, name, version); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.toolchainsFound[entry] = tc
	c.mu.Unlock()
	return tc, nil
}

// hostToolchain is the host's toolchain name, found once per Cache.
func (c *Cache) hostToolchain(ctx context.Context, name string) (*Toolchain, error) {
	c.mu.Lock()
	tc := c.toolchainsFound[name]
	c.mu.Unlock()
	if tc != nil {
		return tc, nil
	}
	tc, err := findToolchain(ctx, name, c.opts.Toolchains)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.toolchainsFound[name] = tc
	c.mu.Unlock()
	return tc, nil
}

// toolchainBinds are the read-only binds of the toolchains outside the base.
func toolchainBinds(tcs []*Toolchain) []sandbox.Bind {
	var out []sandbox.Bind
	for _, tc := range tcs {
		if tc.Bind {
			out = append(out, sandbox.Bind{Source: tc.Dir, Target: tc.Path, ReadOnly: true})
		}
	}
	return out
}

// systemCABundle is Debian's bundle of the CAs the system trusts.
const systemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// systemPath is the PATH of a sandbox after the environment's own dirs.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// toolchainEnv is the environment of every sandbox of a non-Python spec:
// the toolchains' bin dirs first on PATH (then the dependency dirs' bin),
// JAVA_HOME and MALLOC_ARENA_MAX for a JDK, JRE_HOME for a Java runtime
// (JAVA_HOME too when there is no JDK), the system's CAs for a fetched
// Node, and the dependency caches' fixed paths (depsEnv).
func toolchainEnv(tcs []*Toolchain) []string {
	var path []string
	var env []string
	hasJDK := slices.ContainsFunc(tcs, func(tc *Toolchain) bool { return tc.Name == "java" })
	for _, tc := range tcs {
		if bin := filepath.Join(tc.Path, "bin"); !slices.Contains(filepath.SplitList(systemPath), bin) && !slices.Contains(path, bin) {
			path = append(path, bin)
		}
		switch {
		case tc.Name == "java", tc.Name == "jre" && !hasJDK:
			// Without a cgroup a sandbox's memory limit is RLIMIT_AS,
			// which glibc's 64 MiB arena per JVM thread exhausts at start.
			env = append(env, "JAVA_HOME="+tc.Path, "MALLOC_ARENA_MAX=2")
		}
		if tc.Name == "jre" {
			env = append(env, "JRE_HOME="+tc.Path)
		}
		if tc.Name == "node" && tc.Fetched {
			// nodejs.org's builds trust their own CA list, not the
			// system's (Debian's node does): a proxy's CA the host
			// trusts would fail every npm fetch.
			env = append(env, "NODE_EXTRA_CA_CERTS="+systemCABundle)
		}
	}
	path = append(path, DepsDir+"/cargo/bin", DepsDir+"/go/bin", systemPath)
	return append(append([]string{"PATH=" + strings.Join(path, ":")}, env...), depsEnv...)
}
