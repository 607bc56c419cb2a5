package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// TestClassify: every error the server's classifier named before the
// engine's kinds existed is answered with the status and code it was,
// except sandbox.ErrInvalidConfig, which is now invalid_config (still
// 400) so that msb exits 3 for it through the daemon as in-process.
func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("doing it: %w", err) }
	for _, tc := range []struct {
		err    error
		status int
		code   api.ErrorCode
	}{
		{errorf(http.StatusRequestTimeout, api.CodeBadRequest, "stalled"), http.StatusRequestTimeout, api.CodeBadRequest},
		{wrap(&http.MaxBytesError{Limit: 1}), http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge},
		{wrap(sandbox.ErrEscape), http.StatusBadRequest, api.CodePathEscape},
		{wrap(sandbox.ErrInvalidConfig), http.StatusBadRequest, api.CodeInvalidConfig},
		{wrap(engine.ErrBadRequest), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(api.ErrBadName), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(sandbox.ErrInvalid), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(session.ErrInvalidCommand), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(sandbox.ErrTooLarge), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(dataset.ErrBadPredictions), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(dataset.ErrUnknownFormat), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(dataset.ErrBadFilter), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(spec.ErrBadSpecFile), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(store.ErrBadRef), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(&sandbox.OpError{Op: "file.read", Msg: "is a directory"}), http.StatusBadRequest, api.CodeBadRequest},
		{wrap(engine.ErrNotFound), http.StatusNotFound, api.CodeNotFound},
		{wrap(sandbox.ErrNotFound), http.StatusNotFound, api.CodeNotFound},
		{wrap(dataset.ErrUnknownID), http.StatusNotFound, api.CodeNotFound},
		{wrap(fs.ErrNotExist), http.StatusNotFound, api.CodeNotFound},
		{wrap(engine.ErrNoCache), http.StatusNotFound, api.CodeNotFound}, // was 500: unnamed
		{wrap(sandbox.ErrExists), http.StatusConflict, api.CodeConflict},
		{wrap(harness.ErrRunBusy), http.StatusConflict, api.CodeConflict},
		// The sandbox's repository is in a state git cannot diff: the
		// sandbox's doing, never the daemon's 500.
		{fmt.Errorf("diff of sb1: %w: fatal: not a git repository", task.ErrDiff), http.StatusConflict, api.CodeConflict},
		{wrap(session.ErrSessionEnded), http.StatusConflict, api.CodeSessionEnded},
		{wrap(engine.ErrNoInstance), http.StatusConflict, api.CodeNoInstance},
		{wrap(engine.ErrGone), http.StatusGone, api.CodeGone},
		{wrap(sandbox.ErrClosed), http.StatusGone, api.CodeGone},
		{wrap(engine.ErrQuota), http.StatusTooManyRequests, api.CodeQuotaExceeded},
		{wrap(engine.ErrTooLarge), http.StatusInsufficientStorage, api.CodeTooLarge},
		{wrap(engine.ErrClosed), http.StatusServiceUnavailable, api.CodeUnavailable},
		{wrap(errShuttingDown), http.StatusServiceUnavailable, api.CodeUnavailable},
		{wrap(context.Canceled), http.StatusServiceUnavailable, api.CodeUnavailable},
		{wrap(context.DeadlineExceeded), http.StatusServiceUnavailable, api.CodeUnavailable},
		{wrap(&sandbox.OpError{Op: "exec", Msg: "broken pipe"}), http.StatusInternalServerError, api.CodeInternal},
		{errors.New("something broke"), http.StatusInternalServerError, api.CodeInternal},
	} {
		if status, code := classify(tc.err); status != tc.status || code != tc.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", tc.err, status, code, tc.status, tc.code)
		}
	}
}
