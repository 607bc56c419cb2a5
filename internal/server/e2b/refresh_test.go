package e2b

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestE2BRefreshEnvsLogs drives POST /sandboxes/{id}/refreshes, envd's
// GET /envs and both log routes through the e2b SDK's own clients
// (testdata/sdk_refresh.py).
func TestE2BRefreshEnvsLogs(t *testing.T) {
	out := sdkScript(t, "sdk_refresh.py")
	var got struct {
		Longer, Shorter, Least, None, Unknown []any
		Async, Paused                         int
		Envs                                  []any
		EnvsInCommand                         string `json:"envs_in_command"`
		V1, V2                                []any
		V2Search                              int `json:"v2_search"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Longer[0] != 204.0 || got.Longer[1].(float64) < 300 {
		t.Errorf("refresh for 900 s of a sandbox with 300 s left: %v, want 204 and the end moved about 600 s later", got.Longer)
	}
	if fmt.Sprint(got.Shorter) != "[204 true]" {
		t.Errorf("refresh for 20 s of a sandbox with 900 s left: %v, want 204 and the end unchanged", got.Shorter)
	}
	if got.Least[0] != 204.0 || got.Least[1].(float64) <= 0 {
		t.Errorf("refresh for 1 s of a sandbox with 12 s left: %v, want 204 and the end later (E2B's least is 15 s)", got.Least)
	}
	if fmt.Sprint(got.None) != "[204 true]" {
		t.Errorf("refresh without a duration: %v, want 204 and the end no earlier", got.None)
	}
	if fmt.Sprint(got.Unknown) != "[404 true]" || got.Paused != 404 {
		t.Errorf("refresh of an unknown sandbox %v, of a paused one %d; want 404 with E2B's error naming it, and 404", got.Unknown, got.Paused)
	}
	if got.Async != 204 {
		t.Errorf("the async client's refresh: %d, want 204", got.Async)
	}
	if want := "[200 map[EMPTY: MSB_REFRESH:a b] no-store]"; fmt.Sprint(got.Envs) != want || got.EnvsInCommand != "a b" {
		t.Errorf("GET /envs: %v, want %s; a command saw %q", got.Envs, want, got.EnvsInCommand)
	}
	if len(got.V1) != 4 || got.V1[0] != true || fmt.Sprint(got.V1[2]) != "[info]" || got.V1[3] != true {
		t.Fatalf("v1 logs parsed by the SDK: %v, want SandboxLogs of info entries naming the sandbox", got.V1)
	}
	lines := fmt.Sprint(got.V1[1])
	for _, want := range []string{"sandbox created from template base", "refreshed: the sandbox ends in 15m0s", "refreshed: the sandbox ends in 15s", "ended: exit status 0"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the v1 log %s lacks %q", lines, want)
		}
	}
	if v2 := fmt.Sprint(got.V2); !strings.HasPrefix(v2, "[true [process ") || !strings.HasSuffix(v2, " ended: exit status 0] [true]]") {
		t.Errorf("the newest info entry of the v2 log: %v, want the last command's end with a zoned timestamp", got.V2)
	}
	if got.V2Search < 3 {
		t.Errorf("v2 log search=refreshed: %d entries, want the 3 or more refreshes that moved the end", got.V2Search)
	}
}
