package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	os.Exit(m.Run())
}

// TestExitCodes checks the one exit-code map end to end, through real
// sandboxes where a command runs.
func TestExitCodes(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"command's code passes through", []string{"run", "--", "sh", "-c", "exit 7"}, 7},
		{"success", []string{"run", "--memory", "256M", "--", "true"}, 0},
		{"killed by a signal", []string{"run", "--", "sh", "-c", "kill -9 $$"}, 137},
		{"missing command", []string{"run", "--", "/no/such/program"}, exitFailure},
		{"bad size", []string{"run", "--memory", "lots", "--", "true"}, exitUsage},
		{"invalid spec", []string{"run", "--layer", "relative/dir", "--", "true"}, exitInvalidConfig},
		{"validate without dataset", []string{"validate"}, exitUsage},
		{"eval without predictions", []string{"eval", "--dataset", "x.jsonl"}, exitUsage},
		{"doctor", []string{"doctor"}, 0},
		{"gc", []string{"gc"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Main(append([]string{"--state-dir", state}, tc.args...)); got != tc.want {
				t.Fatalf("msb %v exited %d, want %d", tc.args, got, tc.want)
			}
		})
	}
	ents, _ := os.ReadDir(state)
	for _, e := range ents {
		if e.Name() != ".empty" {
			t.Errorf("left behind %s", filepath.Join(state, e.Name()))
		}
	}
}
