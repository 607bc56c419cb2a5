package envcache

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
)

// Python is an interpreter environments are built from.
type Python struct {
	Path    string // as the sandbox sees it (the host path with a host base)
	Version string // full version, e.g. "3.11.2"
	Prefix  string // sys.base_prefix
	// Bind is true when Prefix lies outside the host dirs a sandbox sees
	// and must be bound read-only at the same path (pyenv, conda, uv).
	Bind bool
}

func (p *Python) binds() []sandbox.Bind {
	if p == nil || !p.Bind {
		return nil
	}
	return []sandbox.Bind{{Source: p.Prefix, Target: p.Prefix, ReadOnly: true}}
}

// python returns the interpreter for version ("3.9"), cached per Cache.
func (c *Cache) python(ctx context.Context, version string, base baseInfo) (*Python, error) {
	c.mu.Lock()
	p := c.pythons[version]
	c.mu.Unlock()
	if p != nil {
		return p, nil
	}
	var err error
	if base.host {
		p, err = FindPython(ctx, version, c.opts.Pythons, c.opts.PythonSearch)
	} else {
		p, err = c.rootfsPython(version, base)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.pythons[version] = p
	c.mu.Unlock()
	return p, nil
}

// rootfsPython finds python<version> inside the imported root filesystem;
// its version is not probed (it may not run on the host).
func (c *Cache) rootfsPython(version string, base baseInfo) (*Python, error) {
	cands := []string{}
	if p := c.opts.Pythons[version]; p != "" {
		cands = append(cands, p)
	}
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/opt/conda/bin"} {
		cands = append(cands, filepath.Join(d, "python"+version))
	}
	for _, p := range cands {
		if hp, ok := c.baseFile(base, p); ok {
			if fi, err := os.Lstat(hp); err != nil || fi.IsDir() {
				continue
			}
			return &Python{Path: p, Version: version}, nil
		}
	}
	return nil, fmt.Errorf("%w: python %s in base layer %s; searched %s (give --python %s=/path/in/rootfs)", ErrNoPython, version, base.layer.Short(), strings.Join(cands, ", "), version)
}

// PythonSearch is where FindPython looks for interpreters, as the caller's
// environment says (the CLI fills it from PATH, HOME, PYENV_ROOT and
// UV_PYTHON_INSTALL_DIR). The zero value searches /usr/local/bin, /usr/bin
// and /bin, and the system-wide conda dirs.
type PythonSearch struct {
	Path      []string // dirs searched for python<version> first (PATH)
	Home      string   // the user's home: ~/.pyenv, ~/miniconda3 and the like
	PyenvRoot string   // pyenv's root (default Home/.pyenv)
	UVDir     string   // uv's managed interpreters (default Home/.local/share/uv/python)
}

var defaultPythonPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// FindPython finds a host interpreter for version ("3.9"): explicit[version]
// if given, else python<version> in search's path (pyenv shims skipped:
// they do not work in a sandbox), in pyenv, conda and uv-managed installs.
// It runs the interpreter to check its version. The error lists every place
// searched.
func FindPython(ctx context.Context, version string, explicit map[string]string, search PythonSearch) (*Python, error) {
	if version == "" {
		version = "3"
	}
	var cands []string
	if p := explicit[version]; p != "" {
		cands = []string{p}
	} else {
		cands = search.candidates(version)
	}
	var tried []string
	for _, cand := range cands {
		p, err := probePython(ctx, cand)
		if err != nil {
			tried = append(tried, cand+" ("+err.Error()+")")
			continue
		}
		if version != "3" && p.Version != version && !strings.HasPrefix(p.Version, version+".") {
			tried = append(tried, fmt.Sprintf("%s (is %s)", cand, p.Version))
			continue
		}
		return p, nil
	}
	if len(tried) == 0 {
		tried = []string{"nothing found"}
	}
	return nil, fmt.Errorf("%w: python %s; searched PATH, pyenv, conda and uv dirs: %s (give --python %s=/path/to/python%s)",
		ErrNoPython, version, strings.Join(tried, "; "), version, version)
}

// candidates lists the interpreters for version in the search's places,
// in order, each once.
func (search PythonSearch) candidates(version string) []string {
	exe := "python" + version
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	path := search.Path
	if len(path) == 0 {
		path = defaultPythonPath
	}
	for _, d := range path {
		if strings.Contains(d, "shims") {
			continue
		}
		if p := filepath.Join(d, exe); isExec(p) {
			add(p)
		}
	}
	for _, g := range search.globs(version, exe) {
		m, _ := filepath.Glob(g)
		sort.Sort(sort.Reverse(byVersion(m))) // newest patch release first
		for _, p := range m {
			if isExec(p) {
				add(p)
			}
		}
	}
	return out
}

// globs are the patterns of pyenv, conda and uv installs of version.
func (search PythonSearch) globs(version, exe string) []string {
	pyenv, uv := search.PyenvRoot, search.UVDir
	condas := []string{"/opt/conda", "/opt/miniconda3"}
	if search.Home != "" {
		if pyenv == "" {
			pyenv = filepath.Join(search.Home, ".pyenv")
		}
		if uv == "" {
			uv = filepath.Join(search.Home, ".local", "share", "uv", "python")
		}
		for _, d := range []string{"miniconda3", "anaconda3", "miniforge3"} {
			condas = append(condas, filepath.Join(search.Home, d))
		}
	}
	var globs []string
	if pyenv != "" {
		globs = append(globs, filepath.Join(pyenv, "versions", version+"*", "bin", exe))
	}
	for _, conda := range condas {
		globs = append(globs, filepath.Join(conda, "bin", exe), filepath.Join(conda, "envs", "*", "bin", exe))
	}
	if uv != "" {
		globs = append(globs, filepath.Join(uv, "cpython-"+version+"*", "bin", exe))
	}
	return globs
}

// byVersion sorts paths by the version numbers in them.
type byVersion []string

func (b byVersion) Len() int      { return len(b) }
func (b byVersion) Swap(i, j int) { b[i], b[j] = b[j], b[i] }
func (b byVersion) Less(i, j int) bool {
	return versionLess(b[i], b[j])
}

func versionLess(a, b string) bool {
	na, nb := numbers(a), numbers(b)
	for i := 0; i < len(na) && i < len(nb); i++ {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	return len(na) < len(nb)
}

func numbers(s string) []int {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func probePython(ctx context.Context, path string) (*Python, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-I", "-c", "import sys,platform;print(sys.base_prefix);print(platform.python_version())").Output()
	if err != nil {
		return nil, fmt.Errorf("running it: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("unexpected output %q", out)
	}
	p := &Python{Path: path, Prefix: lines[0], Version: lines[1]}
	p.Bind = !underHostDirs(p.Prefix) || !underHostDirs(path)
	if p.Bind && !strings.HasPrefix(path, p.Prefix+"/") {
		return nil, fmt.Errorf("interpreter is outside the host dirs and outside its prefix %s", p.Prefix)
	}
	return p, nil
}

func underHostDirs(p string) bool {
	for _, d := range sandbox.DefaultHostDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
