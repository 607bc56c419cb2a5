package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestE2BSnapshotPages: list_snapshots in pages through the SDK's
// paginators, sync and async, with and without a sandbox filter, and a
// snapshot deleted between two pages.
func TestE2BSnapshotPages(t *testing.T) {
	out := sdkScript(t, "sdk_snapshot_pages.py")
	var got map[string][][]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := map[string]string{
		"all":             "[[page-0 page-1] [page-2 page-3] [page-4 page-other]]",
		"of_sandbox":      "[[page-0 page-1] [page-2 page-3] [page-4]]",
		"default_limit":   "[[page-0 page-1 page-2 page-3 page-4]]",
		"deleted_between": "[[page-0 page-1] [page-3 page-4]]",
		"async":           "[[page-0 page-1 page-3] [page-4]]",
	}
	for k, w := range want {
		if g := fmt.Sprint(got[k]); g != w {
			t.Errorf("%s: pages %s, want %s", k, g, w)
		}
	}
}

// TestE2BSnapshotPagesBadQueries: a limit or next token list_snapshots
// cannot read is a 400.
func TestE2BSnapshotPagesBadQueries(t *testing.T) {
	url := startFront(t)
	for _, q := range []string{"limit=0", "limit=x", "nextToken=%25%25", "nextToken=bm9zbGFzaA"} {
		if status, body := send(t, "GET", url+"/snapshots?"+q, "", nil); status != http.StatusBadRequest {
			t.Errorf("GET /snapshots?%s: %d %s, want 400", q, status, body)
		}
	}
}
