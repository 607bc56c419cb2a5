package e2b

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/checkpoint"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BPauseTerminals: through the e2b SDK (testdata/sdk_pause_terms.py
// pty), a pause that keeps a sandbox's processes does not carry its
// terminals, and says so: a bash and a python REPL started with
// sandbox.pty.create have ended at the resume, each with an end event
// (exit -1) whose error says the terminal was not carried, and the
// sandbox's logs say it too; they are not listed, input to one is
// refused, a background loop started beside them runs on, and a new
// terminal works. (Carried, util-linux script(1), their proxy, ends by
// itself a moment after the restore: a poll interrupted by the dump
// returns nothing, which ends its loop.)
func TestE2BPauseTerminals(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	out := sdkScript(t, "sdk_pause_terms.py", "pty")
	var got struct {
		Tries        int    `json:"tries"`
		Pause        string `json:"pause"`
		Resume       string `json:"resume"`
		ListedBefore bool   `json:"listed_before"`
		Listed       bool   `json:"listed"`
		Ends         []struct {
			ExitCode int     `json:"exit_code"`
			Error    *string `json:"error"`
		} `json:"ends"`
		Input     string   `json:"input"`
		New       string   `json:"new"`
		NewKilled bool     `json:"new_killed"`
		Logs      []string `json:"logs"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Pause != pauseProcesses {
		t.Fatalf("no pause of %d sandboxes kept the processes: msbPause %q", got.Tries, got.Pause)
	}
	if !got.ListedBefore {
		t.Errorf("commands.list() before the pause did not show the two terminals and the loop: %s", out)
	}
	if got.Resume != pauseProcesses {
		t.Logf("the resume kept %q", got.Resume) // the engine's restore failed: files only, as said
	} else if !got.Listed {
		t.Errorf("resumed with its processes, commands.list() is not the loop alone: %s", out)
	}
	if len(got.Ends) != 2 {
		t.Fatalf("the terminals' ends: %s", out)
	}
	for i, e := range got.Ends {
		if e.ExitCode != -1 || e.Error == nil || (got.Resume == pauseProcesses && *e.Error != errTerminalNotCarried) {
			t.Errorf("terminal %d after the resume ended with exit %d, error %v; want -1, %q", i, e.ExitCode, e.Error, errTerminalNotCarried)
		}
	}
	if got.Input != "NotFoundException" {
		t.Errorf("input to an ended terminal: %q, want NotFoundException", got.Input)
	}
	if got.New != "n2" || !got.NewKilled {
		t.Errorf("a new terminal after the resume answered %q, kill %v; want n2, true", got.New, got.NewKilled)
	}
	if got.Resume == pauseProcesses && len(got.Logs) != 2 {
		t.Errorf("the sandbox's logs about terminals: %q, want one line for each", got.Logs)
	}
}

// TestE2BPauseURLAutoResume: through the e2b SDK (sdk_pause_terms.py
// url), a sandbox created with lifecycle on_timeout pause and
// auto_resume, running an HTTP server on port 8000, is paused by its
// timeout and resumed by a request to its URL (get_host), which is
// answered: by the same server (its token, the count after the two
// requests before the pause) when the pause kept the processes; where
// this criu cannot dump the server's socket (before 4.2 on a kernel from
// 6.16), the pause keeps files only and says so, and the request gets the
// closed-port 502 docs/e2b.md promises.
func TestE2BPauseURLAutoResume(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	out := sdkScript(t, "sdk_pause_terms.py", "url")
	var got struct {
		Tries   int      `json:"tries"`
		Before  [][2]any `json:"before"`
		Paused  string   `json:"paused"`
		Pause   string   `json:"pause"`
		Request [2]any   `json:"request"`
		State   string   `json:"state"`
		Resume  string   `json:"resume"`
		Again   [2]any   `json:"again"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if len(got.Before) != 2 || got.Before[0][0] != 200.0 || got.Before[1][0] != 200.0 {
		t.Fatalf("the server before the pause answered %v", got.Before)
	}
	token, _, _ := strings.Cut(got.Before[0][1].(string), " ")
	if got.Before[1][1] != token+" 2" {
		t.Fatalf("the server's answers before the pause: %v; want %q then %q", got.Before, token+" 1", token+" 2")
	}
	if got.Paused != "paused" || got.State != "running" {
		t.Fatalf("state %q at the timeout, %q after the request to its URL; want paused, running", got.Paused, got.State)
	}
	switch {
	case got.Pause == pauseProcesses && got.Resume == pauseProcesses:
		t.Logf("resumed with its processes by a request to its URL, answered %v, then %v", got.Request, got.Again)
		if got.Request != [2]any{200.0, token + " 3"} || got.Again != [2]any{200.0, token + " 4"} {
			t.Errorf("resumed with its processes by a request to its URL: that request got %v, the next %v; want 200 %q, 200 %q (the same server, no request lost)",
				got.Request, got.Again, token+" 3", token+" 4")
		}
	case got.Pause == pauseProcesses:
		t.Logf("the resume kept %q", got.Resume) // the restore failed: files only, as said
		if !strings.HasPrefix(got.Resume, "files only: ") || got.Request[0] != 502.0 {
			t.Errorf("resumed with %q, the request got %v; want files only and a 502", got.Resume, got.Request)
		}
	case strings.HasPrefix(got.Pause, "files only: ") && strings.Contains(got.Pause, checkpoint.ErrInetSockets.Error()):
		t.Logf("this criu cannot dump the server's socket: %s", got.Pause)
		if got.Request[0] != 502.0 || !strings.Contains(got.Request[1].(string), "no service running on port 8000") {
			t.Errorf("after a files-only pause the request to the URL got %v; want the closed-port 502", got.Request)
		}
	default:
		t.Errorf("no pause of %d sandboxes kept the processes or said why not: msbPause %q", got.Tries, got.Pause)
	}
}
