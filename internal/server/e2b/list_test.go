package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestE2BListAndMetrics: Sandbox.list's filters, order and pages, and
// get_metrics' figures, through the e2b SDK.
func TestE2BListAndMetrics(t *testing.T) {
	out := sdkScript(t, "sdk_list.py")
	var got struct {
		Pages        []int `json:"pages"`
		NewestFirst  bool  `json:"newest_first"`
		Asc          []any `json:"asc"`
		Odd          []bool
		Paused       []bool `json:"paused"`
		Running      int    `json:"running"`
		Template     int    `json:"template"`
		StartedAfter int    `json:"started_after"`
		Metrics      struct {
			CPUCount   int     `json:"cpu_count"`
			CPUUsedPct float64 `json:"cpu_used_pct"`
			MemUsed    int64   `json:"mem_used"`
			MemTotal   int64   `json:"mem_total"`
			DiskUsed   int64   `json:"disk_used"`
			DiskTotal  int64   `json:"disk_total"`
			Age        float64 `json:"age"`
		} `json:"metrics"`
		MetricsByID  bool `json:"metrics_by_id"`
		AsyncMetrics bool `json:"async_metrics"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if fmt.Sprint(got.Pages) != "[2 2 1]" || !got.NewestFirst {
		t.Errorf("five sandboxes listed 2 a page: pages %v, newest first %v; want [2 2 1] true", got.Pages, got.NewestFirst)
	}
	if fmt.Sprint(got.Asc) != "[[3 2] true]" {
		t.Errorf("listed 3 a page, oldest first: %v, want pages [3 2] in creation order", got.Asc)
	}
	if fmt.Sprint(got.Odd) != "[true]" {
		t.Errorf("a metadata filter with & = %% and a space: %v, want the one sandbox", got.Odd)
	}
	if fmt.Sprint(got.Paused) != "[true]" || got.Running != 4 {
		t.Errorf("state filters: paused %v, running %d; want the paused one, and the 4 others", got.Paused, got.Running)
	}
	if got.Template != 6 || got.StartedAfter != 0 {
		t.Errorf("template=base kept %d of 6, started_after=now %d of 0", got.Template, got.StartedAfter)
	}
	m := got.Metrics
	if m.CPUCount < 1 || m.CPUUsedPct <= 0 || m.CPUUsedPct > 100 || m.MemUsed <= 0 || m.MemTotal < m.MemUsed ||
		m.DiskUsed <= 0 || m.DiskTotal < m.DiskUsed {
		t.Errorf("metrics after a second of busy loop: %+v, want CPUs, a CPU share in (0, 100], memory and disk used within their totals", m)
	}
	if !got.MetricsByID || !got.AsyncMetrics {
		t.Errorf("Sandbox.get_metrics(id) %v, AsyncSandbox.get_metrics(id) %v; want a sample each", got.MetricsByID, got.AsyncMetrics)
	}
}

// TestE2BListBadQueries: a list query the front end cannot read is a 400.
func TestE2BListBadQueries(t *testing.T) {
	url := startFront(t)
	for _, q := range []string{"limit=0", "limit=x", "nextToken=%21%21", "order=up", "state=gone", "startedAfter=yesterday"} {
		status, body := call(t, "GET", url+"/v2/sandboxes?"+q, map[string]string{"X-API-Key": testKey})
		if status != http.StatusBadRequest {
			t.Errorf("GET /v2/sandboxes?%s: %d %v, want 400", q, status, body)
		}
	}
}

// TestE2BLogs: a sandbox's log says what was done with it, through both
// log routes and their filters.
func TestE2BLogs(t *testing.T) {
	url := startFront(t)
	c := createSandbox(t, url)
	c.sh(t, "true")
	key := map[string]string{"X-API-Key": testKey}
	status, v1 := call(t, "GET", url+"/sandboxes/"+c.id+"/logs", key)
	if status != http.StatusOK {
		t.Fatalf("logs: %d %v", status, v1)
	}
	lines := fmt.Sprint(v1["logs"])
	for _, want := range []string{"sandbox created from template base", "process 1001 started", "process 1001 ended: exit status 0"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the log %s lacks %q", lines, want)
		}
	}
	if entries, _ := v1["logEntries"].([]any); len(entries) != 3 {
		t.Errorf("logEntries %v, want the 3 lines", v1["logEntries"])
	}
	for q, want := range map[string]int{"": 3, "?search=ended": 1, "?level=warn": 0, "?direction=backward&limit=1": 1} {
		status, v2 := call(t, "GET", url+"/v2/sandboxes/"+c.id+"/logs"+q, key)
		if logs, _ := v2["logs"].([]any); status != http.StatusOK || len(logs) != want {
			t.Errorf("v2 logs%s: %d %v, want %d entries", q, status, v2, want)
		}
	}
	_, v2 := call(t, "GET", url+"/v2/sandboxes/"+c.id+"/logs?direction=backward&limit=1", key)
	if logs, _ := v2["logs"].([]any); len(logs) == 1 && !strings.Contains(fmt.Sprint(logs[0]), "ended") {
		t.Errorf("the newest entry is %v, want the process's end", logs[0])
	}
	if status, _ := call(t, "GET", url+"/sandboxes/nope/logs", key); status != http.StatusNotFound {
		t.Errorf("logs of an unknown sandbox: %d, want 404", status)
	}
}

// TestE2BMetrics: a sandbox's metrics after a second of busy loop, through
// the REST API (TestE2BRootless reruns it rootless, where there may be no
// cgroup to read).
func TestE2BMetrics(t *testing.T) {
	url := startFront(t)
	c := createSandbox(t, url)
	c.sh(t, "timeout 1 sh -c 'while :; do :; done'; head -c 2097152 /dev/urandom > /e2b-metrics")
	key := map[string]string{"X-API-Key": testKey}
	req, _ := http.NewRequest("GET", url+"/sandboxes/"+c.id+"/metrics", nil)
	req.Header.Set("X-API-Key", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ms []metric
	if err := json.NewDecoder(res.Body).Decode(&ms); err != nil || res.StatusCode != http.StatusOK || len(ms) == 0 {
		t.Fatalf("metrics: %d %v %v", res.StatusCode, ms, err)
	}
	m := ms[len(ms)-1]
	if m.CPUCount < 1 || m.CPUUsedPct <= 0 || m.CPUUsedPct > 100 || m.MemUsed <= 0 || m.MemTotal < m.MemUsed ||
		m.DiskUsed < 2<<20 || m.DiskTotal < m.DiskUsed || m.TimestampUnix <= 0 {
		t.Errorf("metrics after a second of busy loop and a 2 MiB file in /: %+v, want CPUs, a CPU share in (0, 100], memory used, 2 MiB or more of disk used, within their totals", m)
	}
	status, many := call(t, "GET", url+"/sandboxes/metrics?sandbox_ids="+c.id+",nope", key)
	if sbs, _ := many["sandboxes"].(map[string]any); status != http.StatusOK || len(sbs) != 1 || sbs[c.id] == nil {
		t.Errorf("metrics of %s and an unknown id: %d %v, want the one sandbox's", c.id, status, many)
	}
}

// TestE2BSamplerForgetsClosed: a sandbox the engine closed behind the
// front end's back (reaped, or closed through the native API) is forgotten
// by its sampler, which then stops, even when no client asks about it.
func TestE2BSamplerForgetsClosed(t *testing.T) {
	_, e := startFrontEngine(t)
	f := New(e, testKey, nil)
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	c := createSandbox(t, srv.URL)
	if _, err := e.CloseSandbox(c.id); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); f.box(c.id) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the front end still holds sandbox %s a minute after the engine closed it", c.id)
		}
	}
}
