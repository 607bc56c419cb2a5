package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// answer is how the E2B front end answers one kind of error: the HTTP
// status of the REST API and of envd's /files, and the Connect code of
// envd's RPCs. The SDK raises its exception types from these (sdk names
// the class envd's answers raise; rest the class of the REST API's).
type answer struct {
	status    int
	code      connect.Code
	sdk, rest string
}

// answers is the one table from msb's error kinds to E2B's answers. E2B
// has no conflict, session or gone classes: those are a SandboxException
// with the status, and a closed sandbox is not found as E2B says of a
// killed one. A request that can never be met (a limit above the budget,
// a body too large) is a bad request: E2B answers 400, never 500, for
// what the caller sent.
var answers = map[api.ErrorCode]answer{
	api.CodeBadRequest:       {http.StatusBadRequest, connect.CodeInvalidArgument, "InvalidArgumentException", "SandboxException"},
	api.CodePathEscape:       {http.StatusBadRequest, connect.CodeInvalidArgument, "InvalidArgumentException", "SandboxException"},
	api.CodeInvalidConfig:    {http.StatusBadRequest, connect.CodeInvalidArgument, "InvalidArgumentException", "SandboxException"},
	api.CodeBodyTooLarge:     {http.StatusBadRequest, connect.CodeInvalidArgument, "InvalidArgumentException", "SandboxException"},
	api.CodeTooLarge:         {http.StatusBadRequest, connect.CodeInvalidArgument, "InvalidArgumentException", "SandboxException"},
	api.CodeUnauthorized:     {http.StatusUnauthorized, connect.CodeUnauthenticated, "AuthenticationException", "AuthenticationException"},
	api.CodeNotFound:         {http.StatusNotFound, connect.CodeNotFound, "NotFoundException", "SandboxException"},
	api.CodeGone:             {http.StatusNotFound, connect.CodeNotFound, "NotFoundException", "SandboxException"},
	api.CodeMethodNotAllowed: {http.StatusMethodNotAllowed, connect.CodeUnimplemented, "SandboxException", "SandboxException"},
	api.CodeConflict:         {http.StatusConflict, connect.CodeAlreadyExists, "SandboxException", "SandboxException"},
	api.CodeSessionEnded:     {http.StatusConflict, connect.CodeFailedPrecondition, "SandboxException", "SandboxException"},
	api.CodeNoInstance:       {http.StatusConflict, connect.CodeFailedPrecondition, "SandboxException", "SandboxException"},
	api.CodeQuotaExceeded:    {http.StatusTooManyRequests, connect.CodeResourceExhausted, "RateLimitException", "RateLimitException"},
	api.CodeInternal:         {http.StatusInternalServerError, connect.CodeInternal, "SandboxException", "SandboxException"},
	api.CodeUnavailable:      {http.StatusServiceUnavailable, connect.CodeUnavailable, "SandboxUnreachableException", "ServiceBusyException"},
}

// timedOut answers an operation that ran out of its time: envd's RPCs
// say deadline exceeded, which the SDK raises as TimeoutException.
var timedOut = answer{http.StatusGatewayTimeout, connect.CodeDeadlineExceeded, "TimeoutException", "SandboxException"}

// answerOf is how err is answered: by its kind, except that a deadline
// that passed is a timeout rather than the engine being unavailable.
func answerOf(err error) answer {
	if errors.Is(err, context.DeadlineExceeded) {
		return timedOut
	}
	if a, ok := answers[engine.Kind(err)]; ok {
		return a
	}
	return answers[api.CodeInternal]
}

// engineError answers a REST or /files request's err as E2B does: the
// status and {"code", "message"}.
func engineError(w http.ResponseWriter, err error) {
	a := answerOf(err)
	writeJSON(w, a.status, map[string]any{"code": a.status, "message": err.Error()})
}

// apiError answers a REST request with the status of kind and the
// message format makes.
func apiError(w http.ResponseWriter, kind api.ErrorCode, format string, a ...any) {
	status := answers[kind].status
	writeJSON(w, status, map[string]any{"code": status, "message": fmt.Sprintf(format, a...)})
}

// connectError is err as envd's RPCs answer it.
func connectError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(answerOf(err).code, err)
}
