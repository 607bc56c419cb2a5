package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
)

// TestE2BSudo: on a base with E2B's user (UseBase), `sudo` as `user`
// works as on E2B's passwordless sudo, although every process of the
// sandbox runs with no_new_privs: the sandbox's supervisor starts the
// command (engine.SandboxRequest.Sudo), in forks and resumed sandboxes
// too (testdata/sdk_sudo.py).
func TestE2BSudo(t *testing.T) {
	url, _ := startFrontWith(t, func(e *engine.Engine, f *Front) {
		importUserImage(t, e)
		if err := f.UseBase(context.Background(), userImage); err != nil {
			t.Fatal(err)
		}
	})
	out := sdkScriptAt(t, url, "sdk_sudo.py")
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := map[string]any{
		"ids":       "user\nroot\nuser\nNoNewPrivs:\t1\n",
		"root_file": "by-sudo\nroot\n",
		"scoped":    []any{"bar\n", 0.0, "\n"},
		"env":       "[] /root user\n[kept] /home/user\n",
		"as_root":   "root\n",
		"status":    "3\n",
		"fork":      "root\n",
		"resumed":   "root\n",
	}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
}
