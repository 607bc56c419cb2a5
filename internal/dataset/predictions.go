package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/api"
)

// GoldPredictions is the predictions "file" name that stands for every
// instance's reference fix, as the harness's `--predictions_path gold`.
const GoldPredictions = "gold"

// ErrBadPredictions is returned for a predictions file that cannot be used
// as a whole; the message names every bad row.
var ErrBadPredictions = errors.New("bad predictions")

// LoadPredictions reads a predictions file as the harness does: a JSON list,
// a JSON object keyed by instance id (SWE-agent's form), or JSON Lines. Every
// row must have instance_id, model_name_or_path and model_patch (null is a
// patch that is None); a model name must make a directory name once "/" is
// written "__". An instance predicted twice is an error. Every bad row is
// named in the one error returned.
func LoadPredictions(path string) ([]api.Prediction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading predictions: %w", err)
	}
	rows, err := predictionRows(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPredictions, path, err)
	}
	var out []api.Prediction
	var problems []string
	first := map[string]int{}
	for i, raw := range rows {
		p, err := decodePrediction(raw.fields, raw.key)
		if err == nil {
			if row, dup := first[p.InstanceID]; dup {
				err = fmt.Errorf("instance %s predicted again (first at row %d)", p.InstanceID, row)
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("row %d: %v", i+1, err))
			continue
		}
		first[p.InstanceID] = i + 1
		out = append(out, p)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s:\n  %s", ErrBadPredictions, path, strings.Join(problems, "\n  "))
	}
	return out, nil
}

// ModelDir is the directory name of a model's results, as the harness
// spells it: "/" replaced by "__".
func ModelDir(model string) string { return strings.ReplaceAll(model, "/", "__") }

// Gold returns the gold predictions of insts (model "gold"): each
// instance's ReferenceFix.
func Gold(insts []Instance) []api.Prediction {
	out := make([]api.Prediction, 0, len(insts))
	for _, in := range insts {
		p := in.ReferenceFix()
		out = append(out, api.Prediction{InstanceID: in.InstanceID, Model: "gold", ModelPatch: &p})
	}
	return out
}

// CheckPredictions fails, naming them, for predictions of ids that are not
// instances of the dataset (the harness raises too).
func CheckPredictions(d *Dataset, preds []api.Prediction) error {
	known := make(map[string]bool, len(d.All))
	for _, in := range d.All {
		known[in.InstanceID] = true
	}
	var unknown []string
	for _, p := range preds {
		if !known[p.InstanceID] {
			unknown = append(unknown, p.InstanceID)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("%w: %d predictions are for instances not in %s: %s", ErrUnknownID, len(unknown), d.Path, strings.Join(unknown, ", "))
}

type predictionRow struct {
	fields map[string]json.RawMessage
	key    string // the id it was keyed by, in the dict form
}

func predictionRows(b []byte) ([]predictionRow, error) {
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
		return nil, errors.New("the file is empty")
	case trimmed[0] == '[':
		var rows []map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &rows); err != nil {
			return nil, fmt.Errorf("decoding the JSON list: %w", err)
		}
		out := make([]predictionRow, len(rows))
		for i, r := range rows {
			out[i] = predictionRow{fields: r}
		}
		return out, nil
	case trimmed[0] == '{' && !bytes.Contains(trimmed, []byte("\n{")):
		var byID map[string]map[string]json.RawMessage
		// One prediction on one line has string fields and fails here.
		if err := json.Unmarshal(trimmed, &byID); err == nil {
			keys := make([]string, 0, len(byID))
			for k := range byID {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := make([]predictionRow, len(keys))
			for i, k := range keys {
				out[i] = predictionRow{fields: byID[k], key: k}
			}
			return out, nil
		}
	}
	var out []predictionRow
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("line %d: not a JSON object: %w", n, err)
		}
		out = append(out, predictionRow{fields: r})
	}
	return out, sc.Err()
}

func decodePrediction(f map[string]json.RawMessage, key string) (api.Prediction, error) {
	var p api.Prediction
	if f == nil {
		return p, errors.New("not a JSON object")
	}
	str := func(name string, dst *string) error {
		raw, ok := f[name]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%s: want a string: %w", name, err)
		}
		return nil
	}
	if err := str("instance_id", &p.InstanceID); err != nil {
		return p, err
	}
	if p.InstanceID == "" {
		p.InstanceID = key
	}
	if p.InstanceID == "" {
		return p, errors.New("no instance_id")
	}
	if err := api.CheckName("instance_id", p.InstanceID); err != nil {
		return p, err
	}
	if err := str("model_name_or_path", &p.Model); err != nil {
		return p, err
	}
	if _, ok := f["model_name_or_path"]; !ok || p.Model == "" {
		return p, fmt.Errorf("%s: no model_name_or_path", p.InstanceID)
	}
	if err := api.CheckName("model_name_or_path", ModelDir(p.Model)); err != nil {
		return p, fmt.Errorf("%s: %w", p.InstanceID, err)
	}
	raw, ok := f["model_patch"]
	if !ok {
		return p, fmt.Errorf("%s: no model_patch (write \"model_patch\": null for a prediction without one)", p.InstanceID)
	}
	if string(bytes.TrimSpace(raw)) != "null" {
		var patch string
		if err := json.Unmarshal(raw, &patch); err != nil {
			return p, fmt.Errorf("%s: model_patch: want a string or null: %w", p.InstanceID, err)
		}
		p.ModelPatch = &patch
	}
	return p, nil
}
