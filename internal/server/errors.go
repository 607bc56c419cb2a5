package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
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

// statusOf is the HTTP status of each kind of error (engine.Kind): the
// one map from the vocabulary of errors to statuses (docs/api.md "Errors").
var statusOf = map[api.ErrorCode]int{
	api.CodeBadRequest:       http.StatusBadRequest,
	api.CodePathEscape:       http.StatusBadRequest,
	api.CodeInvalidConfig:    http.StatusBadRequest,
	api.CodeUnauthorized:     http.StatusUnauthorized,
	api.CodeNotFound:         http.StatusNotFound,
	api.CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	api.CodeConflict:         http.StatusConflict,
	api.CodeSessionEnded:     http.StatusConflict,
	api.CodeNoInstance:       http.StatusConflict,
	api.CodeGone:             http.StatusGone,
	api.CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	api.CodeQuotaExceeded:    http.StatusTooManyRequests,
	api.CodeInternal:         http.StatusInternalServerError,
	api.CodeUnavailable:      http.StatusServiceUnavailable,
	api.CodeTooLarge:         http.StatusInsufficientStorage,
}

// Status is the HTTP status the daemon answers an error of kind code
// with, and whether code is a kind it knows.
func Status(code api.ErrorCode) (int, bool) {
	s, ok := statusOf[code]
	return s, ok
}

// classify maps an error to its status and code: the server's own errors
// (an apiError, a body over --max-body, the shutdown) as they say, any
// other by its kind (engine.Kind) and statusOf.
func classify(err error) (int, api.ErrorCode) {
	var ae *apiError
	var mbe *http.MaxBytesError
	var code api.ErrorCode
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.As(err, &mbe):
		code = api.CodeBodyTooLarge
	case errors.Is(err, errShuttingDown):
		code = api.CodeUnavailable
	default:
		code = engine.Kind(err)
	}
	status, ok := statusOf[code]
	if !ok {
		return http.StatusInternalServerError, api.CodeInternal
	}
	return status, code
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
