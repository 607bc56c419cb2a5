package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// harborEnv names the harbor CLI of a venv with Harbor 0.26.0 and the e2b
// SDK (clients/python/requirements-harbor.txt); the default is the
// repository's .venv-harbor, which make pyenv-harbor makes.
const harborEnv = "MSB_TEST_HARBOR"

// TestE2BHarbor runs one Harbor task (testdata/harbor/hello) with Harbor's
// own e2b environment pointed at the front end: Harbor's oracle agent runs
// the task's solution in an msb sandbox, its verifier then reads what it
// wrote, and the trial ends with the sandbox killed. The sandbox comes from
// the prebuilt template base (prebuilt_template_id), so the task's
// Dockerfile is not built; restore_login_path=false because base's /etc
// is the host's, read-only, where Harbor would add a profile script.
func TestE2BHarbor(t *testing.T) {
	runHarbor(t, "testdata/harbor/hello", "--ek", "prebuilt_template_id=base")
}

// TestE2BHarborBuild runs a task without a prebuilt template: Harbor
// builds its environment/Dockerfile (FROM e2bdev/base, WORKDIR, RUN)
// through the SDK's Template API, and the verifier checks the RUN's file.
func TestE2BHarborBuild(t *testing.T) {
	runHarbor(t, "testdata/harbor/hello-built")
}

// runHarbor runs the Harbor task in dir with the oracle agent on the
// front end and checks it got reward 1 and left no sandbox.
func runHarbor(t *testing.T, dir string, args ...string) {
	harbor := os.Getenv(harborEnv)
	if harbor == "" {
		harbor, _ = filepath.Abs("../../../.venv-harbor/bin/harbor")
	}
	if _, err := os.Stat(harbor); err != nil {
		privtest.Skip(t, "no harbor CLI (%s, or make pyenv-harbor): %v", harborEnv, err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(harbor), "python"), "-c", "import e2b, harbor.environments.e2b").CombinedOutput(); err != nil {
		privtest.Skip(t, "%s lacks Harbor's e2b environment (clients/python/requirements-harbor.txt): %v %s", harbor, err, out)
	}
	url := startFront(t)
	jobs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harbor, append([]string{"run", "-p", dir, "-a", "oracle", "-e", "e2b",
		"--ek", "restore_login_path=false", "-o", jobs, "-n", "1"}, args...)...)
	cmd.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+testKey,
		"LITELLM_LOCAL_MODEL_COST_MAP=True", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if exc, _ := filepath.Glob(filepath.Join(jobs, "*", "*", "exception.txt")); len(exc) > 0 {
		b, _ := os.ReadFile(exc[0])
		t.Errorf("the trial failed:\n%s", b)
	}
	if err != nil {
		t.Fatalf("harbor run: %v\n%s", err, out)
	}
	results, _ := filepath.Glob(filepath.Join(jobs, "*", "result.json"))
	if len(results) != 1 {
		t.Fatalf("harbor run wrote %d job results in %s:\n%s", len(results), jobs, out)
	}
	var res struct {
		Stats struct {
			Completed int `json:"n_completed_trials"`
			Errored   int `json:"n_errored_trials"`
			Evals     map[string]struct {
				Metrics []map[string]float64 `json:"metrics"`
			} `json:"evals"`
		} `json:"stats"`
	}
	b, err := os.ReadFile(results[0])
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		t.Fatal(err)
	}
	ev := res.Stats.Evals["oracle__adhoc"]
	if res.Stats.Completed != 1 || res.Stats.Errored != 0 || len(ev.Metrics) != 1 || ev.Metrics[0]["mean"] != 1 {
		rewards, _ := filepath.Glob(filepath.Join(jobs, "*", "*", "verifier", "*"))
		t.Errorf("the oracle's trial: %s, want one trial with reward 1 (verifier files %v)\n%s", b, rewards, out)
	}
	req, _ := http.NewRequest("GET", url+"/v2/sandboxes", nil)
	req.Header.Set("X-API-Key", testKey)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var left []any
	json.NewDecoder(r.Body).Decode(&left)
	if len(left) != 0 {
		t.Errorf("sandboxes left after the trial: %v", left)
	}
}
