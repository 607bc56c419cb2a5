//go:build !msblean

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/sandbox"
)

// engineConfigOf resolves the settings (config file body, "" for none) and
// eval's flags args into the engine's config.
func engineConfigOf(t *testing.T, file string, args ...string) (engine.Config, error) {
	t.Helper()
	g := &globals{env: readEnviron(func(string) (string, bool) { return "", false })}
	if file != "" {
		g.configFile = filepath.Join(t.TempDir(), "msb.yaml")
		if err := os.WriteFile(g.configFile, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := resolveSettings(g)
	if err != nil {
		return engine.Config{}, err
	}
	f := evalFlags{runID: "r"} // validate and eval register --run-id themselves
	fs := pflag.NewFlagSet("eval", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o, err := f.options()
	if err != nil {
		return engine.Config{}, err
	}
	return s.engineConfig(o)
}

// TestBuildAndEvalNetworkSettings: the repository dir, the download cache,
// the build network and the evaluation network reach the engine's config
// from flags and from the config file, flags first; a network other than
// none or host is a usage error.
func TestBuildAndEvalNetworkSettings(t *testing.T) {
	const file = "repos_dir: /srv/repos\ndownload_cache: /srv/downloads\nbuild_network: true\nindex_url: http://127.0.0.1:1/simple/\neval_network: host\n"
	for _, tc := range []struct {
		name string
		file string
		args []string
		want engine.Config
	}{
		{"defaults", "", nil, engine.Config{}},
		{"flags", "", []string{"--repos-dir", "/r", "--download-cache", "/d", "--build-network", "--eval-network", "host"},
			engine.Config{EvalNetwork: sandbox.NetworkHost, Cache: engine.CacheConfig{ReposDir: "/r", DownloadCache: "/d", BuildNetwork: true}}},
		{"config file", file, nil,
			engine.Config{EvalNetwork: sandbox.NetworkHost, Cache: engine.CacheConfig{ReposDir: "/srv/repos", DownloadCache: "/srv/downloads",
				BuildNetwork: true, IndexURL: "http://127.0.0.1:1/simple/"}}},
		{"flags over the file", file, []string{"--repos-dir", "/r", "--download-cache", "/d", "--eval-network", "none"},
			engine.Config{EvalNetwork: sandbox.NetworkNone, Cache: engine.CacheConfig{ReposDir: "/r", DownloadCache: "/d",
				BuildNetwork: true, IndexURL: "http://127.0.0.1:1/simple/"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := engineConfigOf(t, tc.file, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			c, w := cfg.Cache, tc.want.Cache
			if cfg.EvalNetwork != tc.want.EvalNetwork || c.ReposDir != w.ReposDir || c.DownloadCache != w.DownloadCache ||
				c.BuildNetwork != w.BuildNetwork || c.IndexURL != w.IndexURL {
				t.Fatalf("eval network %q, cache %+v; want %q, %+v", cfg.EvalNetwork, c, tc.want.EvalNetwork, w)
			}
		})
	}
	for _, tc := range []struct{ name, file, flag string }{
		{"--eval-network", "", "bridge"},
		{"config file eval_network", "eval_network: bridge\n", ""},
	} {
		var args []string
		if tc.flag != "" {
			args = []string{"--eval-network", tc.flag}
		}
		if _, err := engineConfigOf(t, tc.file, args...); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.name+` "bridge"`) {
			t.Errorf("%s bridge: %v, want a usage error", tc.name, err)
		}
	}
}

// TestCacheFlagsEverywhere: the commands that build environments all take
// the build settings; validate and eval take the evaluation network.
func TestCacheFlagsEverywhere(t *testing.T) {
	root := newRootCmd(&globals{})
	for _, path := range [][]string{{"cache", "build"}, {"validate"}, {"eval"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		flags := []string{"repos-dir", "download-cache", "build-network", "image-template"}
		if path[0] != "cache" {
			flags = append(flags, "eval-network")
		}
		for _, name := range flags {
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("msb %v has no --%s", path, name)
			}
		}
	}
}

// TestConfigDocExample: the config file of docs/config.md is one msb reads.
func TestConfigDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	body, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/config.md has no yaml block")
	}
	g := &globals{configFile: filepath.Join(t.TempDir(), "msb.yaml")}
	if err := os.WriteFile(g.configFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := resolveSettings(g) // the whole file decoded, unknown keys refused
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.cacheConfig(engineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReposDir != "/srv/repos" || c.DownloadCache != "/data/downloads" || c.IndexURL == "" || st.file.EvalNetwork != sandbox.NetworkNone ||
		c.ImageTemplate != "sweb.eval.x86_64.{instance_id_1776}" {
		t.Fatalf("cache config %+v, eval network %q", c, st.file.EvalNetwork)
	}
}

// TestInterpreterSearchFromEnvironment: where interpreters are searched for
// comes from the environment, read here and nowhere below.
func TestInterpreterSearchFromEnvironment(t *testing.T) {
	env := map[string]string{"PATH": "/a/bin:/b/bin", "HOME": "/home/u", "PYENV_ROOT": "/opt/pyenv", "UV_PYTHON_INSTALL_DIR": "/opt/uv"}
	g := &globals{env: readEnviron(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}
	s, err := resolveSettings(g)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.cacheConfig(engineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := envcache.PythonSearch{Path: []string{"/a/bin", "/b/bin"}, Home: "/home/u", PyenvRoot: "/opt/pyenv", UVDir: "/opt/uv"}
	if !reflect.DeepEqual(c.PythonSearch, want) {
		t.Fatalf("python search %+v, want %+v", c.PythonSearch, want)
	}
}
