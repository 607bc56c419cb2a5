// Package task is one instance's work in sandboxes: the agent's sandbox at
// the task's starting state, the agent's patch, and the evaluation of a
// patch in a fresh sandbox, the way the SWE-bench harness does it.
//
// The nouns:
//
//   - Task: an instance (package dataset) with its resolved spec (package
//     spec) and the spec digest that keys stored results.
//   - Env: what tasks are made from: the sandbox runtime and the
//     environment cache. The engine holds one.
//   - Sandbox: a task's sandbox, built from the cached layers (repository at
//     the base commit, the environment, the base) and put in the task's
//     starting state: for SWE-smith instances, whose gold patch introduces
//     the bug, the bug patch applied and committed, so that HEAD is what
//     the agent starts from and what grading resets test files to. It
//     applies patches with the harness's fallbacks (ApplyCommands, the one
//     that worked recorded) and produces the agent's patch (Diff: every
//     change against HEAD, untracked files included, as `git add -A && git
//     diff --cached` gives it to the harness).
//   - Evaluation: Evaluate grades a patch in a fresh Sandbox, never in an
//     agent's: patch applied, the eval script (the harness's eval.sh: test
//     files reset, test_patch applied, the test command between the output
//     markers and its exit code recorded) run under a timeout, the log
//     parsed and judged (package grading). Its artifacts are the harness's
//     files: patch.diff, eval.sh, test_output.txt, run_instance.log.
//   - Validation: Judge decides whether an instance is admitted from the
//     evaluations of its reference fix and of an empty patch: the fix must
//     resolve, the empty patch must not.
package task
