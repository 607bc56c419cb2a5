package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/sandbox"
)

// newBenchAPICmd is `msb bench api`: the daemon (msb serve of the msb
// binary next to msb-bench, else on PATH) against swerex-remote.
func newBenchAPICmd(g Host) *cobra.Command {
	o := bench.APIOptions{}
	var dataset, specFile string
	cmd := &cobra.Command{
		Use:   "api",
		Short: "The daemon's API: exec round trips (unix socket, loopback TCP), create → first exec, a concurrent load, memory per sandbox, against swerex-remote",
		Example: `  msb bench api
  MSB_BENCH_SWEREX=.venv-test/bin/swerex-remote msb bench api --sandboxes 200 --execs 100 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			exe, err := msbExecutable()
			if err != nil {
				return err
			}
			env := g.Env()
			o.Exe, o.StateDir = exe, g.StateDir()
			o.SwerexRemote = first(o.SwerexRemote, env.SwerexRemote)
			cleanup, err := serveDataset(cmd, g, &o, dataset, specFile)
			if err != nil {
				return err
			}
			defer cleanup()
			if o.SwerexRemote == "" {
				fmt.Fprintln(os.Stderr, "msb bench api: no swerex-remote (--swerex-remote or MSB_BENCH_SWEREX): the SWE-ReX baseline is left out")
			}
			rows := bench.API(ctx, o)
			if g.JSON() {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"rows": rows})
			}
			fmt.Printf("%d CPUs\n\n", runtime.NumCPU())
			printRows(rows)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.RoundTrips, "round-trips", 2000, "execs per round-trip measure")
	f.IntVar(&o.Creates, "creates", 50, "create from a cached instance → first command rounds (each in a fresh bash and in a session)")
	f.IntVar(&o.Sandboxes, "sandboxes", 200, "sandboxes of the load run")
	f.IntVar(&o.Execs, "execs", 100, "execs per sandbox in the load run")
	f.IntVar(&o.Concurrency, "concurrency", 32, "requests in flight at once in the load run (the bounded load client)")
	f.StringVar(&o.SwerexRemote, "swerex-remote", "", "SWE-ReX's swerex-remote, for the baseline (env MSB_BENCH_SWEREX)")
	f.IntVar(&o.SwerexServers, "swerex-servers", 20, "swerex-remote servers (one per sandbox) of the baseline's load run")
	f.StringVar(&dataset, "dataset", "", "a dataset the daemon loads (default: the demo's, generated in a temp dir)")
	f.StringVar(&specFile, "spec", "", "its spec file")
	f.StringVar(&o.Instance, "instance", "", "a cached instance for create → first exec (default: the demo's first)")
	return cmd
}

// serveDataset adds to o.ServeArgs the daemon's dataset and cache: the
// given dataset (and spec) with msb's cache, or with none the demo's
// project and instances generated in a temp dir with a cache of its own
// (o.Instance defaulting to the demo's first). cleanup removes the temp dir.
func serveDataset(cmd *cobra.Command, g Host, o *bench.APIOptions, dataset, specFile string) (cleanup func(), err error) {
	cleanup = func() {}
	if dataset == "" {
		dir, err := os.MkdirTemp(g.Env().TmpDir, "msb-bench-api-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { sandbox.RemoveAll(dir) }
		gen, err := demo.Generate(cmd.Context(), filepath.Join(dir, "gen"))
		if err != nil {
			return cleanup, err
		}
		dataset, specFile = gen.DatasetPath, gen.SpecPath
		o.Instance = first(o.Instance, gen.Instances[0].InstanceID)
		o.ServeArgs = append(o.ServeArgs, "--cache", filepath.Join(dir, "cache"))
	} else {
		o.ServeArgs = append(o.ServeArgs, "--cache", g.CacheDir())
	}
	o.ServeArgs = append(o.ServeArgs, "--dataset", dataset)
	if specFile != "" {
		o.ServeArgs = append(o.ServeArgs, "--spec", specFile)
	}
	return cleanup, nil
}

// errNoMsb: msb bench api cannot find the msb binary whose daemon it measures.
var errNoMsb = errors.New("msb bench api needs the msb binary")

// msbExecutable finds msb next to this executable, else on PATH.
func msbExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the msb-bench executable: %w", err)
	}
	next := filepath.Join(filepath.Dir(self), "msb")
	if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return next, nil
	}
	if p, err := exec.LookPath("msb"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w next to msb-bench (%s) or on PATH: build it with make build", errNoMsb, next)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
