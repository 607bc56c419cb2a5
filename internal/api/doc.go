// Package api holds msb's wire types: the JSON that every `--json` output
// prints today and that the HTTP API and the Python client exchange later.
// It is a leaf: it imports no other msb package, so any front end can use it
// without pulling in the engine.
//
// Conventions: field names are snake_case; a list is never null (List
// encodes nil as []) and a map is never null (Map encodes nil as {});
// durations are integer nanoseconds in fields ending in _ns; sizes are bytes
// in fields ending in _bytes. Field names that the SWE-bench harness's files
// use (report.json, the run summary, predictions) are the harness's own
// spelling, e.g. FAIL_TO_PASS and model_name_or_path.
//
// The nouns:
//
//   - Prediction: one row of a predictions file (instance_id,
//     model_name_or_path, model_patch).
//   - EvalResult: one evaluation of one patch on one instance, with its
//     Outcome, the harness's InstanceReport, reward and timings;
//     EvalArtifacts are the files an evaluation leaves (test output, eval
//     script, run log, patch).
//   - RunSummary: the harness's summary of a run for one model; RunReport:
//     everything a batch run returns.
//   - Validation: whether an instance is admitted (gold resolves, empty
//     does not).
//   - ExecRequest, ExecResult: one command in a sandbox; SandboxInfo: a
//     live sandbox; Limits: its resources.
//   - CacheLayer, CacheUsage, BuildResult, VerifyReport, ...: the cache's
//     inventory and operations.
package api
