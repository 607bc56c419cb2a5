package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/eval"
)

// runGradingDemo generates the demo project and grades its gold and empty
// patches, which is what `msb validate` does on a real dataset.
func runGradingDemo(ctx context.Context, g *globals, dir string) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "msb-demo-"); err != nil {
			return err
		}
	}
	start := time.Now()
	gen, err := demo.Generate(ctx, dir)
	if err != nil {
		return fmt.Errorf("generating the demo project: %w", err)
	}
	fmt.Printf("\ngenerated %s: %d bug instances of %s in %s (python %s)\n", dir, len(gen.Instances), demo.Repo, fmtDur(time.Since(start)), gen.PyVersion)
	f := &evalFlags{datasetFlags: datasetFlags{specFile: gen.SpecPath},
		cacheDir: filepath.Join(dir, "cache"), workers: 2, timeout: 5 * time.Minute, outDir: filepath.Join(dir, "logs"), runID: "demo"}
	o, err := f.options(g)
	if err != nil {
		return err
	}
	if o.Overrides, err = loadOverrides(gen.SpecPath); err != nil {
		return err
	}
	gold, empty := map[string]eval.Prediction{}, map[string]eval.Prediction{}
	for _, in := range gen.Instances {
		p, none := in.Patch, ""
		gold[in.InstanceID] = eval.Prediction{InstanceID: in.InstanceID, Model: "gold", Patch: &p}
		empty[in.InstanceID] = eval.Prediction{InstanceID: in.InstanceID, Model: "empty", Patch: &none}
	}
	// The environment is built once, by whichever evaluation asks first;
	// the others wait for it.
	var wg sync.WaitGroup
	var goldRes, emptyRes []eval.Result
	var goldErr, emptyErr error
	for _, run := range []struct {
		preds      map[string]eval.Prediction
		gradeEmpty bool
		res        *[]eval.Result
		err        *error
	}{{gold, false, &goldRes, &goldErr}, {empty, true, &emptyRes, &emptyErr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oo := o
			oo.GradeEmpty = run.gradeEmpty
			r, err := eval.NewRunner(eval.RunOptions{Options: oo, RunID: f.runID, OutDir: f.outDir, Workers: f.workers})
			if err != nil {
				*run.err = err
				return
			}
			_, *run.res, *run.err = r.Run(ctx, gen.Instances, run.preds, nil)
		}()
	}
	wg.Wait()
	if goldErr != nil || emptyErr != nil {
		return fmt.Errorf("grading: %v %v", goldErr, emptyErr)
	}
	vals := judgeValidations(goldRes, emptyRes)
	printDemoGrades(vals)
	fmt.Printf("\nall in %s; logs, reports and the dataset are in %s\n", fmtDur(time.Since(start)), dir)
	fmt.Printf("rerun the grading alone: bin/msb validate --dataset %s --spec %s --cache %s\n", gen.DatasetPath, gen.SpecPath, f.cacheDir)
	for _, v := range vals {
		if !v.Valid {
			return fmt.Errorf("demo instance %s did not validate: %s", v.InstanceID, v.Reason)
		}
	}
	return nil
}

func printDemoGrades(vals []Validation) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nINSTANCE\tGOLD PATCH\tEMPTY PATCH\tVALID\tENV (build or reuse)\tTASK READY\tTESTS\tGRADING")
	for _, v := range vals {
		t := v.Gold.Timings
		fmt.Fprintf(tw, "%s\t%s (reward %.0f)\t%s (reward %.0f)\t%v\t%s\t%s\t%s\t%s\n", v.InstanceID,
			v.Gold.Outcome, v.Gold.Reward, v.Empty.Outcome, v.Empty.Reward, v.Valid,
			fmtDur(t["env"]), fmtDur(t["task_ready"]), fmtDur(t["tests"]), fmtDur(t["grading"]))
	}
	tw.Flush()
}
