//go:build !msblean

package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func newSpecCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "spec", Short: "Specs: how an instance is built and tested"}
	var datasetPath, specFile string
	show := &cobra.Command{
		Use:   "show INSTANCE_ID --dataset FILE",
		Short: "Print the resolved spec of an instance (built-in table, defaults and your spec file applied)",
		Example: `  msb spec show demo__calc-1 --dataset demo/dataset.jsonl --spec demo/specs.yaml
  msb spec show django__django-11099 --dataset verified.jsonl --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := datasetFlags{dataset: datasetPath, instances: args, specFile: specFile, skipBad: true}
			e, err := g.openEngine(cmd.Context(), engineOptions{specFile: specFile})
			if err != nil {
				return err
			}
			defer e.Close()
			if _, err := f.load(e); err != nil {
				return err
			}
			v, err := e.Spec(args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(v)
			}
			// The JSON form is valid YAML: decoding it keeps the api's
			// field names and order.
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			var doc yaml.Node
			if err := yaml.Unmarshal(b, &doc); err != nil {
				return err
			}
			blockStyle(&doc)
			enc := yaml.NewEncoder(os.Stdout)
			if err := enc.Encode(&doc); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			return enc.Close()
		},
	}
	show.Flags().StringVar(&datasetPath, "dataset", "", "the dataset holding the instance")
	show.Flags().StringVar(&specFile, "spec", "", "YAML spec file (docs/spec-format.md)")
	cmd.AddCommand(show)
	return cmd
}

// blockStyle drops the JSON text's flow and quoting styles, so the YAML
// reads as YAML.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
