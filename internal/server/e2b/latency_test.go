package e2b

import (
	"encoding/json"
	"testing"
)

// TestE2BLatencyScript: the latency benchmark's script (docs/e2b.md
// "Latency") runs its E2B path through the SDK and reports every figure.
// It checks the script works, not the numbers.
func TestE2BLatencyScript(t *testing.T) {
	t.Setenv("MSB_URL", "")
	out := sdkScript(t, "bench_latency.py", "--n", "2", "--rtt", "3")
	var got struct {
		E2B map[string]map[string]float64 `json:"e2b"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script printed %q: %v", out, err)
	}
	for _, k := range []string{"create_to_first_command", "kill", "command_true"} {
		if got.E2B[k]["p50_ms"] <= 0 || got.E2B[k]["p95_ms"] < got.E2B[k]["p50_ms"] {
			t.Errorf("%s: %v", k, got.E2B[k])
		}
	}
}
