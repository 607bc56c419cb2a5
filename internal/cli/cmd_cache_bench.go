package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"

	"github.com/minisandbox/msb/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchCacheCmd(g *globals) *cobra.Command {
	o := bench.CacheOptions{}
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Task-ready time and disk for N instances of one repository: paper's tar.gz extraction vs msb overlay vs copy mode",
		Example: `  msb bench cache
  msb bench cache --n 1,10,50 --files 5000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := g.jobRuntime()
			if err != nil {
				return err
			}
			rows, err := bench.Cache(cmd.Context(), rt, o)
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": rt.Mode(), "rows": rows})
			}
			fmt.Printf("mode: %s, %d CPUs, repository of %d files x %d bytes\n\n", rt.Mode(), runtime.NumCPU(), o.Files, o.FileSize)
			printRows(rows)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Ns, "n", []int{1, 10, 50}, "instance counts, ascending")
	f.IntVar(&o.Files, "files", 2000, "files in the generated repository")
	f.IntVar(&o.FileSize, "file-size", 4096, "bytes per file")
	f.StringVar(&o.Dir, "dir", "", "scratch dir (default a temp dir, removed after)")
	f.StringVar(&o.Python, "python", "", "interpreter for the shared venv (default python3 found on this host)")
	return cmd
}
