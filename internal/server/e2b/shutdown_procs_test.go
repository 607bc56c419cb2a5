package e2b

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BShutdownPauseProcesses: a daemon's shutdown pause keeps the
// running processes of a sandbox the engine can dump, as a pause through
// the SDK does (TestE2BPauseProcesses): through the e2b SDK
// (testdata/sdk_procs.py), sandboxes each run a background
// counter, the daemon stops, and a new daemon on the same state and cache
// gives them back on connect; where the pause kept the processes
// (msbPause processes, pauseMode full) the counter goes on from its number
// with the token it drew, no line lost or repeated, and the process API
// knows its processes as before (checkProcessAPI: the front end's records
// of them are in the paused sandbox's record); where it kept files only,
// no counter runs and none is listed. At least one must keep its
// processes.
func TestE2BShutdownPauseProcesses(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")

	first := startDaemonPausing(t, state, cache, 2*time.Minute) // a bound on a stuck pause, not a speed
	out := sdkScriptAt(t, first.url, "sdk_procs.py", "before")
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first daemon: %v", err)
	}
	var before struct {
		Sandboxes []struct {
			ID           string         `json:"id"`
			Before       [][]string     `json:"before"`
			Procs        map[string]int `json:"procs"`
			ListedBefore []listedProc   `json:"listed_before"`
		} `json:"sandboxes"`
	}
	if err := json.Unmarshal(out, &before); err != nil || len(before.Sandboxes) == 0 {
		t.Fatalf("the SDK script printed %q (%v), want the sandboxes it made", out, err)
	}
	recs, err := (&records{dir: stateDir(cache)}).load(kindPaused)
	if err != nil || len(recs) != len(before.Sandboxes) {
		t.Fatalf("%d paused records after the shutdown (%v), want %d", len(recs), err, len(before.Sandboxes))
	}
	ids := []string{"after"}
	for _, s := range before.Sandboxes {
		if len(s.Before) == 0 {
			t.Errorf("%s: the counter wrote nothing before the shutdown", s.ID)
		}
		ids = append(ids, fmt.Sprintf("%s,%d,%d", s.ID, s.Procs["ticker"], s.Procs["reader"]))
	}

	second := startDaemon(t, state, cache)
	defer func() {
		if err := second.stop(); err != nil {
			t.Errorf("stopping the second daemon: %v", err)
		}
	}()
	out = sdkScriptAt(t, second.url, "sdk_procs.py", ids...)
	var got struct {
		Resumes []struct {
			ID        string     `json:"id"`
			State     string     `json:"state"`
			Pause     string     `json:"pause"`
			PauseMode string     `json:"pause_mode"`
			Resumed   [][]string `json:"resumed"`
			After     [][]string `json:"after"`
			Running   string     `json:"running"`
			procAPI
		} `json:"resumes"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Resumes) != len(before.Sandboxes) {
		t.Fatalf("the SDK script printed %q (%v), want %d resumes", out, err, len(before.Sandboxes))
	}
	restored := 0
	for i, r := range got.Resumes {
		b := before.Sandboxes[i].Before
		if r.State != "paused" {
			t.Errorf("%s after the restart: state %q, want paused", r.ID, r.State)
		}
		if len(b) == 0 || len(r.After) < len(b) {
			t.Errorf("%s: the counter's file had %d lines before the shutdown, %d after the resume", r.ID, len(b), len(r.After))
			continue
		}
		// One token, the one drawn before the shutdown, and numbers from 0
		// on without a gap: the same process, nothing lost or counted twice.
		for n, l := range r.After {
			if len(l) != 2 || l[0] != b[0][0] || l[1] != itoa(n) {
				t.Errorf("%s: line %d of the counter's file is %q: want %q %d", r.ID, n, l, b[0][0], n)
				break
			}
		}
		switch {
		case r.Pause == pauseProcesses:
			restored++
			if r.PauseMode != "full" || len(r.After) < len(r.Resumed)+5 || r.Running != "1" {
				t.Errorf("%s resumed with its processes (pauseMode %q): the counter wrote %d lines after the resume's %d, %s running; want full, 5 more, 1 running",
					r.ID, r.PauseMode, len(r.After)-len(r.Resumed), len(r.Resumed), r.Running)
			}
			r.ListedBefore = before.Sandboxes[i].ListedBefore
			checkProcessAPI(t, r.ID, r.procAPI)
		case strings.HasPrefix(r.Pause, "files only: "):
			t.Logf("%s: msbPause %q", r.ID, r.Pause) // files only, as said
			if r.PauseMode != "filesystem" || r.Running != "0" || len(r.Listed) != 0 {
				t.Errorf("%s kept files only (%q), yet pauseMode %q, %s counters run and the process API lists %v", r.ID, r.Pause, r.PauseMode, r.Running, r.Listed)
			}
		default:
			t.Errorf("%s: msbPause %q after the restart, want %q or why files only", r.ID, r.Pause, pauseProcesses)
		}
	}
	if restored == 0 {
		t.Errorf("no sandbox of %d kept its processes across the shutdown: %s", len(got.Resumes), out)
	}
	if recs, err := (&records{dir: stateDir(cache)}).load(kindPaused); err != nil || len(recs) != 0 {
		t.Errorf("%d paused records after the resumes and kills (%v), want none", len(recs), err)
	}
}
