package engine

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/harness"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// Errors of the engine; test with errors.Is.
var (
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("engine is closed")
	// ErrNotFound: no such sandbox or instance.
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: a request that cannot be carried out as given (unknown
	// instance in a run, a prediction for an instance not in the run,
	// instances without a usable spec, a bad name). The message names every
	// offending item.
	ErrBadRequest = errors.New("bad request")
	// ErrNoInstance: the operation needs a task sandbox (Diff, Evaluate) and
	// the sandbox was made from raw layers.
	ErrNoInstance = errors.New("sandbox has no instance")
	// ErrNoCache: a cache that must exist (inspection commands) does not.
	ErrNoCache = errors.New("no cache")
	// ErrTooLarge: a sandbox's memory or disk limit exceeds the whole
	// admission budget, so it could never be admitted.
	ErrTooLarge = errors.New("sandbox does not fit in the budget")
	// ErrQuota: there is no room for the sandbox now (live sandboxes,
	// memory or disk reserved by others) and it was not to wait, or not
	// that long. The message says which resource.
	ErrQuota = errors.New("over quota")
	// ErrGone: the sandbox was closed or reaped; the message says when
	// and why.
	ErrGone = errors.New("sandbox is gone")
)

// kinds lists, in the order they are tried, the sentinel errors of the
// engine and the packages below it with the kind each one is. The first
// sentinel err matches decides, so a more precise kind comes before a
// broader one (path_escape before bad_request).
var kinds = []struct {
	kind      api.ErrorCode
	sentinels []error
}{
	{api.CodeInvalidConfig, []error{sandbox.ErrInvalidConfig}},
	{api.CodePathEscape, []error{sandbox.ErrEscape}},
	{api.CodeBadRequest, []error{ErrBadRequest, api.ErrBadName, sandbox.ErrInvalid, session.ErrInvalidCommand,
		sandbox.ErrTooLarge, dataset.ErrBadPredictions, dataset.ErrUnknownFormat, dataset.ErrBadFilter,
		spec.ErrBadSpecFile, store.ErrBadRef, envcache.ErrImageNoRepo, rootfs.ErrNoUser}},
	{api.CodeNotFound, []error{ErrNotFound, ErrNoCache, sandbox.ErrNotFound, dataset.ErrUnknownID, fs.ErrNotExist, envcache.ErrNoImage}},
	// task.ErrDiff: the sandbox's repository is in a state git cannot diff
	// (the agent replaced or broke its .git), the sandbox's doing.
	{api.CodeConflict, []error{sandbox.ErrExists, harness.ErrRunBusy, task.ErrDiff}},
	{api.CodeSessionEnded, []error{session.ErrSessionEnded}},
	{api.CodeNoInstance, []error{ErrNoInstance}},
	{api.CodeGone, []error{ErrGone, sandbox.ErrClosed}},
	{api.CodeQuotaExceeded, []error{ErrQuota}},
	{api.CodeTooLarge, []error{ErrTooLarge}},
	{api.CodeUnavailable, []error{ErrClosed, context.Canceled, context.DeadlineExceeded, sandbox.ErrNoForwarder}},
}

// Kind is the class of err in the one vocabulary of msb's errors: the
// api.ErrorCode of the first sentinel of the engine, or of a package below
// it, that err matches; api.CodeInternal when it matches none. The server
// answers the kind with an HTTP status, the CLI exits with an exit code,
// the Python client raises an exception class, each from its one table
// keyed by the kind.
func Kind(err error) api.ErrorCode {
	for _, k := range kinds {
		for _, s := range k.sentinels {
			if errors.Is(err, s) {
				return k.kind
			}
		}
	}
	// A file operation the sandbox refused (not a directory, not a tar,
	// permission): the request's doing.
	var oe *sandbox.OpError
	if errors.As(err, &oe) && strings.HasPrefix(oe.Op, "file.") {
		return api.CodeBadRequest
	}
	return api.CodeInternal
}
