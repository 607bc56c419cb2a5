package e2b

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/checkpoint"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BPauseProcesses: through the e2b SDK (testdata/sdk_pause_procs.py),
// a pause keeps a sandbox's running processes where the engine can dump
// them, as E2B's pause keeps memory: a background counter goes on after
// the resume from the number it had, with the token it drew, and no line
// lost or repeated. Where the engine cannot (a filtered network), the
// pause keeps files only and the sandbox's info says why (msbPause); a
// restore that fails resumes the files alone and says so too.
func TestE2BPauseProcesses(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	out := sdkScript(t, "sdk_pause_procs.py")
	var got struct {
		Tries     int    `json:"tries"`
		State     string `json:"state"`
		PauseMode string `json:"pause_mode"`
		Resumes   []struct {
			Pause   string     `json:"pause"`
			Before  [][]string `json:"before"`
			After   [][]string `json:"after"`
			Running string     `json:"running"`
		} `json:"resumes"`
		FilteredPause     string `json:"filtered_pause"`
		FilteredPauseMode string `json:"filtered_pause_mode"`
		FilteredRunning   string `json:"filtered_running"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.State != "paused" || got.PauseMode != "full" || len(got.Resumes) == 0 {
		t.Fatalf("state %q, pauseMode %q after the pause, %d resumes: %s; want paused, full (E2B's memory pause)", got.State, got.PauseMode, len(got.Resumes), out)
	}
	restored := false
	for i, r := range got.Resumes {
		if len(r.Before) == 0 || len(r.After) < len(r.Before) {
			t.Errorf("resume %d: the counter's file had %d lines before the pause, %d after", i, len(r.Before), len(r.After))
			continue
		}
		// One token, numbers from 0 on without a gap: the same process
		// before and after, nothing counted twice.
		for n, l := range r.After {
			if len(l) != 2 || l[0] != r.After[0][0] || l[1] != itoa(n) {
				t.Errorf("resume %d: line %d of the counter's file is %q (token %q): want %q %d", i, n, l, r.After[0][0], r.After[0][0], n)
				break
			}
		}
		switch {
		case r.Pause == pauseProcesses:
			restored = true
			if len(r.After) < len(r.Before)+5 || r.Running != "1" {
				t.Errorf("resumed with its processes: the counter wrote %d lines after the pause's %d, %s running; want 5 more, 1 running",
					len(r.After)-len(r.Before), len(r.Before), r.Running)
			}
		case strings.HasPrefix(r.Pause, "files only: the restore failed: "):
			t.Logf("resume %d: %s", i, r.Pause) // the engine's restore failed: files only, as said
			if r.Running != "0" {
				t.Errorf("resume %d fell back to the files, yet %s counters run", i, r.Running)
			}
		default:
			t.Errorf("resume %d: msbPause %q after the resume", i, r.Pause)
		}
	}
	if !restored {
		t.Errorf("no resume of %d restored the processes (the engine's restore failed each time; see above)", len(got.Resumes))
	}
	if !strings.HasPrefix(got.FilteredPause, "files only: ") || !strings.Contains(got.FilteredPause, "filtered network") ||
		got.FilteredPauseMode != "filesystem" || got.FilteredRunning != "0" {
		t.Errorf("a sandbox on a filtered network: msbPause %q, pauseMode %q, %s counters running after the resume; want files only, why, filesystem, none",
			got.FilteredPause, got.FilteredPauseMode, got.FilteredRunning)
	}
}

// itoa is n in decimal.
func itoa(n int) string { return strconv.Itoa(n) }

// requireCriu skips t (fails it under MSB_TEST_STRICT) when the host has
// no criu that can dump and restore sandboxes (checkpoint.Find says why).
func requireCriu(t *testing.T) {
	t.Helper()
	if _, err := checkpoint.Find(context.Background(), ""); err != nil {
		privtest.Skip(t, "%v", err)
	}
}
