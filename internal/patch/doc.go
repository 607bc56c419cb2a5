// Package patch reads unified diffs (git's and plain ones) without applying
// them: which files a diff touches, for deriving test directives from a
// test_patch and for restoring the test files a model patch must not
// change.
//
// The nouns:
//
//   - File: one file a diff touches, with its old and new paths (either is
//     empty when the file is created or deleted) and whether it is binary.
//   - Files: every File of a diff, in diff order. It reads "diff --git"
//     headers, "---"/"+++" pairs, rename and copy lines and git's quoted
//     paths, and skips what it does not understand, so any input is safe.
//
// GitHeaderPaths and MinusPaths reproduce the two regular expressions the
// SWE-bench harness applies to a test_patch (`diff --git a/.* b/(.*)` for
// test directives and `--- a/(.*)` for the files it resets), quirks
// included, so that a run here picks the same tests as the harness.
package patch
