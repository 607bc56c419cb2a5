// Package server is msb serve's HTTP layer over one engine.Engine: the
// native API (/v1, with its OpenAPI document), the gym routes under /v1/gym,
// the SWE-ReX-compatible routes (/swerex/{sandbox_id}/..., and at the root
// for a daemon serving one sandbox), /metrics and /v1/health. It holds the
// engine and nothing else: every sandbox operation goes through it.
//
// The nouns:
//
//   - Server: the handlers, the batch jobs and the metrics of one engine;
//     Serve runs it on listeners until its context ends, then shuts down
//     gracefully (requests in flight finish, jobs are cancelled).
//   - Options: the token, the body cap, the admission wait cap, the jobs'
//     output directory, the gym's step timeout, the SWE-ReX root sandbox.
//   - Listener: a unix socket (trusted: its file mode is the access
//     control) or TCP (every request needs the token, compared in constant
//     time).
//   - route: one native route, with its request and response types; the
//     route table is both the mux and the source of the OpenAPI document
//     (openapi.go), so the two cannot drift apart.
//   - Job: a batch evaluation or validation running in the background,
//     writing the SWE-bench harness's files (a harness.Dir sink).
//   - rexSandbox: the SWE-ReX view of one sandbox: its sessions by name,
//     the commands still running after a timeout, the last answer for
//     X-Request-ID replay.
//
// Errors of /v1 are one shape, api.ErrorBody, with a stable api.ErrorCode
// per class (errors.go maps the engine's sentinel errors); the SWE-ReX
// routes answer as SWE-ReX does (511 swerexception bodies, 422 detail
// lists, 401 detail strings). See docs/api.md.
package server
