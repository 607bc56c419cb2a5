package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
)

// newBenchForkCmd is `msb bench fork`: snapshot, fork and rollback of
// live sandboxes through the engine, against podman commit + run.
func newBenchForkCmd(g Host) *cobra.Command {
	o := bench.ForkOptions{}
	var out string
	var sizes []string
	cmd := &cobra.Command{
		Use:   "fork",
		Short: "Snapshot (8 MiB, 100 MiB, 1 GiB written), fork into 1 and 32 children, rollback, memory and disk per child, against podman commit + run",
		Long: `Measures through the engine, as the daemon serves them: a snapshot of a sandbox that wrote each
--sizes, a fork until each child's first command has answered (1 child and --children children),
a rollback of a sandbox that wrote --rollback-size, and the PSS and the disk an idle child takes.
Beside them, interleaved round by round, podman does the same state with podman commit --pause and
podman run (skipped, and said so, when podman is not installed). Writes the same files as msb bench
into --out; docs/bench.md, "Fork, snapshot and rollback", has the method and results.`,
		Example: `  msb bench fork
  msb bench fork --sizes 8MiB,100MiB --rounds 5 --children 16 --podman=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Sizes, err = parseSizes(sizes); err != nil {
				return err
			}
			cfg, err := g.EngineConfig()
			if err != nil {
				return err
			}
			o.Logger = g.Logger()
			o.Progress = func(line string) { fmt.Fprintln(os.Stderr, "msb bench:", line) }
			rep, err := bench.Fork(cmd.Context(), cfg, o)
			return finishReport(g, out, rep, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Work, "work", defaultBenchWork(), "work dir kept between runs (the snapshots' cache, podman storage, base rootfs)")
	f.StringVar(&out, "out", "msb-bench-fork-out", "where the tables and CSV files are written")
	f.StringSliceVar(&sizes, "sizes", []string{"8MiB", "100MiB", "1GiB"}, "bytes a sandbox writes before its snapshot, one comparison each (B, KiB, MiB, GiB)")
	f.IntVar(&o.Rounds, "rounds", 10, "interleaved rounds of each snapshot size, of the fork into 1 child and of the rollback")
	f.IntVar(&o.LargeRounds, "large-rounds", 3, "interleaved rounds of a snapshot of 256 MiB or more and of the fork into --children children")
	f.IntVar(&o.Children, "children", 32, "children of the many-children fork")
	f.IntVar(&o.Warmup, "warmup", 1, "rounds run first and not recorded")
	f.Int64Var(&o.RollbackBytes, "rollback-size", 8<<20, "bytes a sandbox writes before it is rolled back")
	f.Int64Var(&o.ForkBytes, "fork-size", 0, "bytes a sandbox writes before it is forked")
	f.IntVar(&o.Spares, "spares", 0, "the engine's warm pool: with N > 0 a fork's children are taken from spares of their shape, made after the previous fork (root mode)")
	f.BoolVar(&o.ReadySpares, "ready-spares", false, "with --spares, each fork first waits (untimed, up to 5 s) until the pool holds its children's spares")
	f.DurationVar(&o.Idle, "idle", 2*time.Second, "how long the children sit idle before their memory is read")
	f.BoolVar(&o.Podman, "podman", true, "compare with podman commit + run (skipped, and said so, when it is not installed)")
	f.StringVar(&o.PodmanRootfs, "podman-rootfs", "", "root filesystem of podman's base image (default: debootstrap into the work dir)")
	return cmd
}

// parseSizes reads sizes such as 8MiB, 1GiB, 512KiB or 4096(B).
func parseSizes(ss []string) ([]int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	var out []int64
	for _, s := range ss {
		num, mult := s, int64(1)
		for _, u := range units {
			if v, ok := strings.CutSuffix(s, u.suffix); ok {
				num, mult = v, u.mult
				break
			}
		}
		var n int64
		if _, err := fmt.Sscan(num, &n); err != nil || n < 0 || fmt.Sprint(n) != num {
			return nil, fmt.Errorf("%w: size %q: want a number with B, KiB, MiB or GiB", errUsage, s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// finishReport ends a bench command that ran and returned rep and err:
// bad options are a usage error; a report, even one beside an error, is
// named by the command line and emitted.
func finishReport(g Host, dir string, rep *bench.Report, err error) error {
	if errors.Is(err, bench.ErrOptions) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if rep == nil {
		return err
	}
	rep.Command = strings.Join(append([]string{"msb bench"}, os.Args[1:]...), " ")
	return errors.Join(err, emitReport(g, dir, rep))
}

// emitReport writes rep into dir and prints it (as JSON with --json); it
// fails when writing or a comparison failed.
func emitReport(g Host, dir string, rep *bench.Report) error {
	files, werr := rep.Write(dir)
	if g.JSON() {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"report": rep, "summaries": bench.Summaries(rep.Samples), "files": files})
	} else {
		rep.WriteText(os.Stdout)
		fmt.Printf("\nwrote %s\n", strings.Join(files, " "))
	}
	if werr != nil {
		return werr
	}
	if n := len(rep.Failures); n > 0 {
		return fmt.Errorf("%d comparisons failed (listed under FAILED)", n)
	}
	return nil
}
