package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/harness"
)

// TestEngineRunBusy: an instance of a run id that another evaluation
// writes (another engine or process holds it) is refused by RunEvaluation
// and RunValidation, naming the run id, and nothing of the run is
// evaluated or written; other instances of the run go on; once released,
// the same run goes through.
func TestEngineRunBusy(t *testing.T) {
	e := openEngine(t, "", nil)
	inst := generated(t).Instances[0]
	root := t.TempDir()
	unlock, err := harness.New(root).LockRun("busy", []string{inst.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	run := EvalRun{RunID: "busy", InstanceIDs: []string{inst.InstanceID}, Predictions: []api.Prediction{{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &empty}}, Workers: 1}
	out := harness.New(root)
	if _, err := e.RunEvaluation(context.Background(), run, out); !errors.Is(err, harness.ErrRunBusy) || !strings.Contains(err.Error(), `"busy"`) {
		t.Fatalf("evaluation of a held run: %v", err)
	}
	if _, err := e.RunValidation(context.Background(), ValidateRun{RunID: "busy", InstanceIDs: []string{inst.InstanceID}, Workers: 1}, out); !errors.Is(err, harness.ErrRunBusy) {
		t.Fatalf("validation of a held run: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "busy")); len(ents) != 1 || ents[0].Name() != harness.LockDir {
		t.Fatalf("a refused run wrote %v", ents)
	}
	other := generated(t).Instances[1]
	if _, err := e.RunEvaluation(context.Background(), EvalRun{RunID: "busy", InstanceIDs: []string{other.InstanceID},
		Predictions: []api.Prediction{{InstanceID: other.InstanceID, Model: "m", ModelPatch: &empty}}, Workers: 1}, out); err != nil {
		t.Fatalf("another instance of the held run: %v", err)
	}
	unlock()
	rep, err := e.RunEvaluation(context.Background(), run, out)
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("after release: %v %+v", err, rep)
	}
}
