package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/task"
)

// TestClassifySandboxState: errors a sandbox's own state causes are the
// client's (4xx), never the daemon's 500.
func TestClassifySandboxState(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   api.ErrorCode
	}{
		{fmt.Errorf("diff of sb1: %w: fatal: not a git repository", task.ErrDiff), http.StatusConflict, api.CodeConflict},
		{errors.New("something broke"), http.StatusInternalServerError, api.CodeInternal},
	} {
		if status, code := classify(tc.err); status != tc.status || code != tc.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", tc.err, status, code, tc.status, tc.code)
		}
	}
}
