package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Prediction is one row of a predictions file.
type Prediction struct {
	InstanceID string  `json:"instance_id"`
	Model      string  `json:"model_name_or_path"`
	Patch      *string `json:"model_patch"`
}

// LoadPredictions reads a JSON list, a JSON object keyed by instance id, or
// JSONL. A row without instance_id is an error naming its position.
func LoadPredictions(path string) (map[string]Prediction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading predictions: %w", err)
	}
	rows, err := decodePredictions(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]Prediction{}
	for i, p := range rows {
		if p.InstanceID == "" {
			return nil, fmt.Errorf("%s: prediction %d has no instance_id", path, i+1)
		}
		if _, dup := out[p.InstanceID]; dup {
			return nil, fmt.Errorf("%s: instance %s predicted twice", path, p.InstanceID)
		}
		out[p.InstanceID] = p
	}
	return out, nil
}

func decodePredictions(b []byte) ([]Prediction, error) {
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
		return nil, nil
	case trimmed[0] == '[':
		var rows []Prediction
		if err := json.Unmarshal(trimmed, &rows); err != nil {
			return nil, fmt.Errorf("decoding JSON list: %w", err)
		}
		return rows, nil
	case trimmed[0] == '{' && !strings.Contains(string(trimmed), "\n{"):
		var byID map[string]Prediction
		if err := json.Unmarshal(trimmed, &byID); err == nil {
			var rows []Prediction
			for id, p := range byID {
				if p.InstanceID == "" {
					p.InstanceID = id
				}
				rows = append(rows, p)
			}
			return rows, nil
		}
	}
	var rows []Prediction
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var p Prediction
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rows = append(rows, p)
	}
	return rows, sc.Err()
}
