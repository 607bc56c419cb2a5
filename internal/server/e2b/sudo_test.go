package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
)

// TestE2BSudo: on a base with E2B's user (UseBase), `sudo` as `user`
// works as on E2B's passwordless sudo, although every process of the
// sandbox runs with no_new_privs: the sandbox's supervisor starts the
// command (engine.SandboxRequest.Sudo), in forks and resumed sandboxes
// too, and from a pty (pty.create) on a terminal of its own
// (testdata/sdk_sudo.py).
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
		// sudo from a pty: another pty, the caller's size, root; sudo -i
		// reads keys; a resize reaches the command; Ctrl-C kills sleep,
		// and sudo dies of it too (130 for the shell).
		"pty_login":      "root /root",
		"pty_login_exit": "3",
		"pty_resized":    "40 120",
		"pty_ctrl_c":     "130",
	}
	if f := strings.Fields(fmt.Sprint(got["pty_tty"])); len(f) != 5 || !strings.HasPrefix(f[1], "/dev/pts/") || f[0] == f[1] || f[2]+" "+f[3] != "24 80" || f[4] != "root" {
		t.Errorf("pty_tty: %q, want the pty's and another pty's names, 24 80 and root", got["pty_tty"])
	}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
}
