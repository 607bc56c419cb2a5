package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

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

// apiError is an error with the status and code it is answered with.
type apiError struct {
	status int
	code   api.ErrorCode
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code api.ErrorCode, format string, args ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, api.CodeBadRequest, format, args...)
}

// classify maps an error to its status and code: the one place where the
// engine's (and below) sentinel errors become the API's.
func classify(err error) (int, api.ErrorCode) {
	var ae *apiError
	var mbe *http.MaxBytesError
	var oe *sandbox.OpError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge
	case errors.Is(err, sandbox.ErrEscape):
		return http.StatusBadRequest, api.CodePathEscape
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, api.ErrBadName), errors.Is(err, sandbox.ErrInvalidConfig),
		errors.Is(err, sandbox.ErrInvalid), errors.Is(err, session.ErrInvalidCommand), errors.Is(err, sandbox.ErrTooLarge),
		errors.Is(err, dataset.ErrBadPredictions), errors.Is(err, dataset.ErrUnknownFormat), errors.Is(err, dataset.ErrBadFilter),
		errors.Is(err, spec.ErrBadSpecFile), errors.Is(err, store.ErrBadRef):
		return http.StatusBadRequest, api.CodeBadRequest
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, sandbox.ErrNotFound), errors.Is(err, dataset.ErrUnknownID), errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, sandbox.ErrExists), errors.Is(err, harness.ErrRunBusy):
		return http.StatusConflict, api.CodeConflict
	case errors.Is(err, task.ErrDiff):
		// The sandbox's repository is in a state git cannot diff (the
		// agent replaced or broke its .git): the sandbox's doing.
		return http.StatusConflict, api.CodeConflict
	case errors.Is(err, session.ErrSessionEnded):
		return http.StatusConflict, api.CodeSessionEnded
	case errors.Is(err, engine.ErrNoInstance):
		return http.StatusConflict, api.CodeNoInstance
	case errors.Is(err, engine.ErrGone), errors.Is(err, sandbox.ErrClosed):
		return http.StatusGone, api.CodeGone
	case errors.Is(err, engine.ErrQuota):
		return http.StatusTooManyRequests, api.CodeQuotaExceeded
	case errors.Is(err, engine.ErrTooLarge):
		return http.StatusInsufficientStorage, api.CodeTooLarge
	case errors.Is(err, engine.ErrClosed), errors.Is(err, errShuttingDown):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.As(err, &oe) && strings.HasPrefix(oe.Op, "file."):
		// A file operation the sandbox refused (not a directory, not a
		// tar, permission): the request's doing.
		return http.StatusBadRequest, api.CodeBadRequest
	}
	return http.StatusInternalServerError, api.CodeInternal
}

var errShuttingDown = errors.New("the daemon is shutting down")

// writeError answers err in the one error shape of /v1.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: err.Error(), RequestID: requestID(r)}})
}
