package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func newSpecCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "spec", Short: "Specs: how an instance is built and tested"}
	var datasetPath, specFile string
	show := &cobra.Command{
		Use:   "show INSTANCE_ID --dataset FILE",
		Short: "Print the resolved spec of an instance (built-in table, defaults and your spec file applied)",
		Example: `  msb spec show django__django-11099 --dataset verified.jsonl
  msb spec show demo__calc-1 --dataset demo/dataset.jsonl --spec demo/specs.yaml --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if datasetPath == "" {
				return fmt.Errorf("%w: --dataset is required", errUsage)
			}
			insts, _, err := dataset.Load(datasetPath, dataset.Filter{IDs: args})
			if err != nil {
				return err
			}
			if len(insts) == 0 {
				return fmt.Errorf("%w: no instance %s in %s", errUsage, args[0], datasetPath)
			}
			var ov *spec.Overrides
			if specFile != "" {
				if ov, err = spec.LoadOverrides(specFile); err != nil {
					return err
				}
			}
			sp, err := spec.Resolve(insts[0], ov)
			if err != nil {
				return err
			}
			out := map[string]any{"spec": sp, "test_command": sp.TestCommand(insts[0]), "test_files": spec.TestFiles(insts[0].TestPatch),
				"environment_commit": spec.EnvironmentCommit(insts[0])}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(out)
			}
			return yaml.NewEncoder(os.Stdout).Encode(out)
		},
	}
	show.Flags().StringVar(&datasetPath, "dataset", "", "the dataset holding the instance")
	show.Flags().StringVar(&specFile, "spec", "", "YAML spec file (docs/spec-format.md)")
	cmd.AddCommand(show)
	return cmd
}
