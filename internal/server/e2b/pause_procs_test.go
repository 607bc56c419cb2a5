package e2b

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/checkpoint"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// TestE2BPauseProcesses: through the e2b SDK (testdata/sdk_procs.py), a
// pause keeps a sandbox's running processes where the engine can dump
// them, as E2B's pause keeps memory: a background counter goes on after
// the resume from the number it had, with the token it drew, and no line
// lost or repeated; and the process API knows them as before
// (checkProcessAPI), also after a second pause and resume. Where the engine cannot (a filtered network), the
// pause keeps files only and the sandbox's info says why (msbPause); a
// restore that fails resumes the files alone and says so too.
func TestE2BPauseProcesses(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	out := sdkScript(t, "sdk_procs.py", "pause")
	var got struct {
		Tries     int    `json:"tries"`
		State     string `json:"state"`
		PauseMode string `json:"pause_mode"`
		Resumes   []struct {
			Pause         string       `json:"pause"` // what the last resume kept
			FirstResume   string       `json:"first_resume"`
			SecondPause   string       `json:"second_pause"`
			ListedBetween []listedProc `json:"listed_between"`
			Before        [][]string   `json:"before"`
			After         [][]string   `json:"after"`
			Running       string       `json:"running"`
			procAPI
		} `json:"resumes"`
		FilteredPause     string       `json:"filtered_pause"`
		FilteredPauseMode string       `json:"filtered_pause_mode"`
		FilteredRunning   string       `json:"filtered_running"`
		FilteredListed    []listedProc `json:"filtered_listed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.State != "paused" || got.PauseMode != "full" || len(got.Resumes) == 0 {
		t.Fatalf("state %q, pauseMode %q after the pause, %d resumes: %s; want paused, full (E2B's memory pause)", got.State, got.PauseMode, len(got.Resumes), out)
	}
	// The daemon's first sandbox too: its network namespace, where its
	// control socket lies, was made for it at once (before session 19
	// its init's clone made it, and its pause kept files only).
	if got.Tries != 1 {
		t.Errorf("%d sandboxes created until a pause kept the processes, want the first", got.Tries)
	}
	restored := false
	for i, r := range got.Resumes {
		name := "resume " + itoa(i)
		if len(r.Before) == 0 || len(r.After) < len(r.Before) {
			t.Errorf("%s: the counter's file had %d lines before the pause, %d after", name, len(r.Before), len(r.After))
			continue
		}
		// One token, numbers from 0 on without a gap: the same process
		// before and after, nothing counted twice.
		for n, l := range r.After {
			if len(l) != 2 || l[0] != r.After[0][0] || l[1] != itoa(n) {
				t.Errorf("%s: line %d of the counter's file is %q (token %q): want %q %d", name, n, l, r.After[0][0], r.After[0][0], n)
				break
			}
		}
		if r.FirstResume == pauseProcesses {
			// Paused again once resumed: what the sandbox's info says
			// the second pause kept, and the process API between.
			t.Logf("%s: the second pause kept %q, its resume %q", name, r.SecondPause, r.Pause)
			if !reflect.DeepEqual(r.ListedBetween, r.ListedBefore) {
				t.Errorf("%s: commands.list() after the first resume %+v, before the pause %+v", name, r.ListedBetween, r.ListedBefore)
			}
			if r.SecondPause != pauseProcesses && !strings.HasPrefix(r.SecondPause, "files only: ") {
				t.Errorf("%s: msbPause %q after the second pause", name, r.SecondPause)
			}
		}
		switch {
		case r.Pause == pauseProcesses:
			restored = true
			if len(r.After) < len(r.Before)+5 || r.Running != "1" {
				t.Errorf("resumed with its processes: the counter wrote %d lines after the pause's %d, %s running; want 5 more, 1 running",
					len(r.After)-len(r.Before), len(r.Before), r.Running)
			}
			checkProcessAPI(t, name, r.procAPI)
		case strings.HasPrefix(r.Pause, "files only: "):
			t.Logf("%s: %s", name, r.Pause) // the engine's restore failed: files only, as said
			if r.Running != "0" || len(r.Listed) != 0 {
				t.Errorf("%s fell back to the files, yet %s counters run and the process API lists %v", name, r.Running, r.Listed)
			}
		default:
			t.Errorf("%s: msbPause %q after the resume", name, r.Pause)
		}
	}
	if !restored {
		t.Errorf("no resume of %d restored the processes (the engine's restore failed each time; see above)", len(got.Resumes))
	}
	if !strings.HasPrefix(got.FilteredPause, "files only: ") || !strings.Contains(got.FilteredPause, "filtered network") ||
		got.FilteredPauseMode != "filesystem" || got.FilteredRunning != "0" || len(got.FilteredListed) != 0 {
		t.Errorf("a sandbox on a filtered network: msbPause %q, pauseMode %q, %s counters running and %v listed after the resume; want files only, why, filesystem, none",
			got.FilteredPause, got.FilteredPauseMode, got.FilteredRunning, got.FilteredListed)
	}
}

// procAPI is what testdata/sdk_procs.py saw of the process API around a
// pause: the processes commands.list() showed before it and after the
// resume, the ticker's output read by connect after the resume and its
// end once killed, the reader's end after input and end of file.
type procAPI struct {
	Procs        map[string]int `json:"procs"` // the ticker's and reader's pids
	ListedBefore []listedProc   `json:"listed_before"`
	Listed       []listedProc   `json:"listed"`
	Ticks        []string       `json:"ticks"`
	Killed       bool           `json:"killed"`
	TickerEnd    procEnd        `json:"ticker_end"`
	ReaderEnd    procEnd        `json:"reader_end"`
	ListedAfter  []listedProc   `json:"listed_after"`
}

type listedProc struct {
	PID  int      `json:"pid"`
	Tag  *string  `json:"tag"`
	Cmd  string   `json:"cmd"`
	Args []string `json:"args"`
	Cwd  *string  `json:"cwd"`
	Mark *string  `json:"mark"` // its env PROC_MARK
}

type procEnd struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
}

// checkProcessAPI checks r, of a sandbox resumed with its processes: the
// process API lists what it listed before the pause (pid, tag, command,
// cwd, envs); connect reads the ticker's output from its first tick, which
// no stream read before the pause, with no tick lost or twice; kill ends
// it with its end event (exit -1); the reader takes input and exits 3 at end of
// file; then only the counter runs.
func checkProcessAPI(t *testing.T, name string, r procAPI) {
	t.Helper()
	if len(r.ListedBefore) != 3 || !reflect.DeepEqual(r.Listed, r.ListedBefore) {
		t.Errorf("%s: commands.list() after the resume %+v, before the pause %+v; want the same three", name, r.Listed, r.ListedBefore)
	}
	if len(r.Ticks) < 40 {
		t.Errorf("%s: connect read %d ticks of the ticker after the resume, want 40 or more: %q", name, len(r.Ticks), r.Ticks)
	}
	for n, l := range r.Ticks {
		if l != "tick "+itoa(n) {
			t.Errorf("%s: line %d the ticker's connect read is %q, want %q: its output across the pause lost or repeated", name, n, l, "tick "+itoa(n))
			break
		}
	}
	if !r.Killed || r.TickerEnd.ExitCode != -1 {
		t.Errorf("%s: kill said %v, the ticker's end event exit %d; want true, -1 (killed)", name, r.Killed, r.TickerEnd.ExitCode)
	}
	if r.ReaderEnd.ExitCode != 3 || r.ReaderEnd.Stdout != "got hello\neof\n" {
		t.Errorf("%s: the reader ended with exit %d, output %q; want 3, %q", name, r.ReaderEnd.ExitCode, r.ReaderEnd.Stdout, "got hello\neof\n")
	}
	if len(r.ListedAfter) != 1 || r.ListedAfter[0].Tag != nil {
		t.Errorf("%s: commands.list() after the kill and the reader's exit: %+v, want the counter alone", name, r.ListedAfter)
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

// TestProcCutAndRecord: a process kept by a pause has its log cut back
// to the output its restored command had sent, never below what a stream
// has sent, and its record (a paused sandbox's, for the next daemon)
// gives it back with the output no stream has sent, its offset in the
// command's output and what it is known by.
func TestProcCutAndRecord(t *testing.T) {
	b := &box{procs: map[uint32]*proc{}}
	cwd := "/tmp"
	p := newProc(7, "ticker", &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "x"}, Envs: map[string]string{"A": "b"}, Cwd: &cwd}, func() {})
	p.stdin, p.pty = &stdinPipe{path: "/tmp/.msb-e2b-stdin-x"}, &process.PTY_Size{Cols: 80, Rows: 24}
	p.user = &sysUser{name: "user", uid: 1000, gid: 1000, home: "/home/user"}
	for i, s := range []string{"ab", "cde", "f", "gh"} {
		p.output(0, i == 2, []byte(s))
	}
	p.sent = 1 // a stream sent "ab"
	p.mu.Lock()
	p.cutTo(3)
	p.mu.Unlock()
	if got := logText(p); got != "ab|c" || p.out != 3 || p.size != 3 {
		t.Fatalf("cut to 3: log %q, out %d, size %d; want ab|c, 3, 3", got, p.out, p.size)
	}
	p.mu.Lock()
	p.cutTo(1) // below what was sent: "ab" stays
	p.late = endEvent(5, "exit status 5", "")
	r := p.record()
	p.mu.Unlock()
	if got := logText(p); got != "ab" || p.out != 2 {
		t.Fatalf("cut to 1 after ab was sent: log %q, out %d; want ab, 2", got, p.out)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back procRecord
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	q := b.restoredProc(back)
	if q.pid != 7 || q.tag != "ticker" || q.key != p.key || q.out != 2 || !q.suspended || logText(q) != "" ||
		q.stdin.path != p.stdin.path || q.pty.GetCols() != 80 || *q.user != *p.user || q.config.GetCwd() != "/tmp" ||
		q.config.GetEnvs()["A"] != "b" || q.late.GetEnd().GetExitCode() != 5 || b.live.Load() != 1 {
		t.Fatalf("restored from its record %s: %+v", data, q)
	}
}

// logText is p's log's output, one event a word.
func logText(p *proc) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var words []string
	for _, ev := range p.log {
		d := ev.GetData()
		words = append(words, string(d.GetStdout())+string(d.GetStderr())+string(d.GetPty()))
	}
	return strings.Join(words, "|")
}
