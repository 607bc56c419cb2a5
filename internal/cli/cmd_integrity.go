//go:build !msblean

package cli

// msb integrity check: the static integrity rules (internal/grading/integrity)
// over whole datasets, without a sandbox. A row's patch (its reference fix,
// or a prediction's model patch) is read against the row's test patch, as
// every evaluation reads it; the answer counts the flagged patches per
// repository and names each finding. On reference fixes every flag is a
// false flag: the command is how docs/integrity.md's counts are made.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/spec"
)

func newIntegrityCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "integrity", Short: "Reward integrity: the static check of patches (docs/integrity.md)"}
	var preds, regex, reposDir string
	check := &cobra.Command{
		Use:   "check DATASET...",
		Short: "Check every row's patch with the static integrity rules (no sandbox) and count the flags per repository",
		Long: "Reads each row's reference fix (or, with --predictions, its model patch) against the row's test patch with\n" +
			"the static rules every evaluation applies, nothing applied or run. Exits 1 when a patch is flagged:\n" +
			"on reference fixes every flag is a false flag.",
		Example: `  msb integrity check ../shared/datasets/swe-bench-verified.jsonl
  msb integrity check ../shared/datasets/multi-swe-bench/*.jsonl
  msb integrity check --predictions preds.jsonl verified.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := runIntegrityCheck(args, regex, preds, reposDir)
			if err != nil {
				return err
			}
			if err := printIntegrityCheck(g, rep); err != nil {
				return err
			}
			if rep.Flagged > 0 {
				return &exitError{code: exitFailure, msg: fmt.Sprintf("%d of %d patches flagged", rep.Flagged, rep.Rows)}
			}
			return nil
		},
	}
	check.Flags().StringVar(&preds, "predictions", "gold", `predictions to check (instance_id, model_patch; JSON, JSONL or a dict by id), or "gold" for the reference fixes`)
	check.Flags().StringVar(&regex, "regex", "", "only instance ids matching this regular expression")
	check.Flags().StringVar(&reposDir, "repos-dir", "", "git repositories (owner__name.git or owner__name) to read the base files from, as an evaluation reads them")
	cmd.AddCommand(check)
	return cmd
}

// runIntegrityCheck reads the datasets and checks the patches: every row's
// reference fix, or each prediction's model patch (a prediction for an
// instance no dataset has is an error; a row without a prediction is not
// counted).
func runIntegrityCheck(paths []string, regex, preds, reposDir string) (api.IntegrityCheckReport, error) {
	rep := api.IntegrityCheckReport{Patches: preds}
	var insts []dataset.Instance
	for _, p := range paths {
		d, err := dataset.Read(p, dataset.Options{Filter: dataset.Filter{Regex: regex}})
		if errors.Is(err, fs.ErrNotExist) {
			return rep, fmt.Errorf("%w: %w", errNoInput, err)
		}
		if err != nil {
			return rep, fmt.Errorf("%w: reading %s: %w", errUsage, p, err)
		}
		for _, re := range d.RowErrors {
			fmt.Fprintf(os.Stderr, "msb: %s: skipping %s\n", p, re.Error())
		}
		rep.SkippedRows += len(d.RowErrors)
		insts = append(insts, d.Selected...)
	}
	patches, err := patchesToCheck(insts, preds)
	if err != nil {
		return rep, err
	}
	counts := map[string]*api.IntegrityRepoCount{}
	for _, in := range insts {
		p, ok := patches[in.InstanceID]
		if !ok {
			continue
		}
		c := counts[in.Repo]
		if c == nil {
			c = &api.IntegrityRepoCount{Repo: in.Repo}
			counts[in.Repo] = c
		}
		c.Rows++
		rep.Rows++
		res := integrity.CheckInstance(p, integrity.Instance{TestPatch: in.TestPatch, TestCommand: testCommand(in), Base: baseFiles(reposDir, in, p)})
		if res.Verdict != api.IntegrityTampered {
			continue
		}
		c.Flagged++
		rep.Flagged++
		f := api.IntegrityPatchFlagged{InstanceID: in.InstanceID, Repo: in.Repo, Reasons: res.Reasons()}
		for _, fd := range res.Findings {
			f.Kinds = append(f.Kinds, string(fd.Kind))
		}
		rep.Flags = append(rep.Flags, f)
	}
	for _, c := range counts {
		rep.Repos = append(rep.Repos, *c)
	}
	sort.Slice(rep.Repos, func(i, j int) bool { return rep.Repos[i].Repo < rep.Repos[j].Repo })
	return rep, nil
}

// testCommand is the command in's spec runs the tests with ("" without a
// spec): the test_script rule reads the scripts it names.
func testCommand(in dataset.Instance) string {
	sp, err := spec.Resolve(in, nil)
	if err != nil {
		return ""
	}
	return sp.TestCommand(in)
}

// baseFiles reads, from in's repository in reposDir (owner__name.git or
// owner__name), the files at in's base commit that the rules read whole
// for modelPatch (integrity.BasePaths), as an evaluation reads them from
// its sandbox; nil without reposDir or that repository, and then the
// rules read the diffs alone.
func baseFiles(reposDir string, in dataset.Instance, modelPatch string) func(string) (string, bool) {
	if reposDir == "" || in.BaseCommit == "" {
		return nil
	}
	name := strings.ReplaceAll(in.Repo, "/", "__")
	repo := ""
	for _, dir := range []string{filepath.Join(reposDir, name+".git"), filepath.Join(reposDir, name)} {
		if _, err := os.Stat(dir); err == nil {
			repo = dir
			break
		}
	}
	if repo == "" {
		return nil
	}
	wanted := map[string]bool{}
	for _, p := range integrity.BasePaths(modelPatch) {
		wanted[p] = true
	}
	return func(p string) (string, bool) {
		if !wanted[p] {
			return "", false
		}
		out, err := exec.Command("git", "-C", repo, "cat-file", "blob", in.BaseCommit+":"+p).Output()
		return string(out), err == nil
	}
}

// patchesToCheck maps instance ids to the patch to check: the reference
// fixes for "gold", else the predictions' model patches (a patch that is
// None is checked as empty).
func patchesToCheck(insts []dataset.Instance, preds string) (map[string]string, error) {
	out := map[string]string{}
	if preds == "gold" {
		for _, in := range insts {
			out[in.InstanceID] = in.ReferenceFix()
		}
		return out, nil
	}
	list, err := dataset.LoadPredictions(preds)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: --predictions: %w", errNoInput, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --predictions: %w", errUsage, err)
	}
	known := map[string]bool{}
	for _, in := range insts {
		known[in.InstanceID] = true
	}
	var unknown []string
	for _, p := range list {
		if !known[p.InstanceID] {
			unknown = append(unknown, p.InstanceID)
			continue
		}
		if p.ModelPatch != nil {
			out[p.InstanceID] = *p.ModelPatch
		} else {
			out[p.InstanceID] = ""
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: %d predictions are for instances not in the datasets given (or not matching --regex): %s",
			errUsage, len(unknown), strings.Join(unknown, ", "))
	}
	return out, nil
}

// printIntegrityCheck prints the report: a row per repository and a
// total, then every flagged patch's reasons in full.
func printIntegrityCheck(g *globals, rep api.IntegrityCheckReport) error {
	if g.json {
		return printJSON(rep)
	}
	t := newTable("REPOSITORY", "ROWS", "FLAGGED")
	for _, c := range rep.Repos {
		t.row(c.Repo, fmt.Sprint(c.Rows), fmt.Sprint(c.Flagged))
	}
	t.row("total", fmt.Sprint(rep.Rows), fmt.Sprint(rep.Flagged))
	if err := t.flush(); err != nil {
		return err
	}
	var ps []problem
	for _, f := range rep.Flags {
		ps = append(ps, problem{id: f.InstanceID, text: strings.Join(f.Reasons, "\n")})
	}
	printProblems(os.Stdout, "flagged ("+rep.Patches+")", ps)
	if rep.SkippedRows > 0 {
		fmt.Fprintf(os.Stderr, "msb: %d rows skipped (not valid instances)\n", rep.SkippedRows)
	}
	return nil
}
