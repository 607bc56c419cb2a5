package engine

import "errors"

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
	// ErrTooLarge: a sandbox's memory limit exceeds the whole admission
	// budget, so it could never be admitted.
	ErrTooLarge = errors.New("sandbox does not fit in the memory budget")
)
