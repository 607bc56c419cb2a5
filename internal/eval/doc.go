// Package eval turns a patch into a verdict the way the SWE-bench harness
// does, without containers.
//
// An Evaluation of one instance always runs in a fresh sandbox built from
// the cached layers (never in an agent's live session): the model patch is
// applied (git apply, then the harness's more tolerant fallbacks, recording
// which one worked), the test files the test_patch touches are reset to the
// base commit, the test_patch is applied, the spec's test command runs
// between the harness's output markers under a timeout in a clean
// environment, and the log is parsed and graded (package grading).
//
// A Runner evaluates many instances with a bounded number of workers and
// writes, per instance, the harness's files (report.json, test_output.txt,
// patch.diff) plus result.json (our outcome and timings); a run is
// resumable because an instance with a result.json is not evaluated again.
// Predictions are read as the harness takes them (instance_id,
// model_name_or_path, model_patch) from JSON, JSONL or a dict by id.
package eval
