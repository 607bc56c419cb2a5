package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BErrorTable walks the one table from msb's error kinds to E2B's
// answers: every kind has one, no bad request is a 500, and the e2b SDK
// itself raises, from each status and Connect code, the exception class
// the table promises.
func TestE2BErrorTable(t *testing.T) {
	type row struct {
		Kind   string `json:"kind"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	var rows []row
	var want []answer
	for _, c := range api.ErrorCodes {
		a, ok := answers[c]
		if !ok {
			t.Errorf("%s: no E2B answer (internal/server/e2b/errors.go answers)", c)
			continue
		}
		if a.status >= 500 && c != api.CodeInternal && c != api.CodeUnavailable {
			t.Errorf("%s: status %d; only msb's own failures are a 5xx", c, a.status)
		}
		rows = append(rows, row{string(c), a.status, a.code.String()})
		want = append(want, a)
	}
	rows = append(rows, row{"timeout", timedOut.status, timedOut.code.String()})
	want = append(want, timedOut)

	py := privtest.Python(t, "the e2b SDK (internal/server/testdata/requirements.txt)")
	if out, err := exec.Command(py, "-c", "import e2b").CombinedOutput(); err != nil {
		privtest.Skip(t, "%s=%s lacks the e2b SDK: %v %s", privtest.PythonEnv, py, err, out)
	}
	in, _ := json.Marshal(rows)
	cmd := exec.Command(py, filepath.Join("testdata", "sdk_errors.py"))
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk_errors.py: %v\n%s", err, cmd.Stderr)
	}
	var got []struct{ Rest, Files, RPC string }
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(rows) {
		t.Fatalf("sdk_errors.py printed %q (%v), want %d rows", out, err, len(rows))
	}
	for i, r := range rows {
		if got[i].RPC != want[i].sdk || got[i].Rest != want[i].rest {
			t.Errorf("%s: the SDK raises %s from envd's RPCs and %s from the REST API, the table says %s and %s",
				r.Kind, got[i].RPC, got[i].Rest, want[i].sdk, want[i].rest)
		}
		// /files shares the status with the REST API and the class with
		// the RPCs where the SDK's envd table knows the status.
		if got[i].Files != want[i].sdk && got[i].Files != "SandboxException" {
			t.Errorf("%s: the SDK raises %s from envd's /files, want %s or SandboxException", r.Kind, got[i].Files, want[i].sdk)
		}
	}
}

// TestE2BErrorsThroughKind: the front end answers the engine's errors by
// their kind, on both planes.
func TestE2BErrorsThroughKind(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   connect.Code
	}{
		{fmt.Errorf("sandbox x: %w", engine.ErrNotFound), http.StatusNotFound, connect.CodeNotFound},
		{fmt.Errorf("sandbox x: %w", engine.ErrGone), http.StatusNotFound, connect.CodeNotFound},
		{fmt.Errorf("no room: %w", engine.ErrQuota), http.StatusTooManyRequests, connect.CodeResourceExhausted},
		{fmt.Errorf("memory: %w", engine.ErrTooLarge), http.StatusBadRequest, connect.CodeInvalidArgument},
		{fmt.Errorf("name: %w", api.ErrBadName), http.StatusBadRequest, connect.CodeInvalidArgument},
		{fmt.Errorf("exec: %w", context.DeadlineExceeded), http.StatusGatewayTimeout, connect.CodeDeadlineExceeded},
		{errors.New("disk on fire"), http.StatusInternalServerError, connect.CodeInternal},
	} {
		w := httptest.NewRecorder()
		engineError(w, tc.err)
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tc.status || body.Code != tc.status || body.Message != tc.err.Error() {
			t.Errorf("%v: %d %s, want %d {code: %d, message}", tc.err, w.Code, w.Body, tc.status, tc.status)
		}
		if c := connect.CodeOf(connectError(tc.err)); c != tc.code {
			t.Errorf("%v: Connect code %v, want %v", tc.err, c, tc.code)
		}
	}
}
