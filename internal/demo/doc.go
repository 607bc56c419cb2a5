// Package demo generates, offline, a small multi-file Python project with
// realistic bug instances: the data behind `msb demo`.
//
// The Project is a real git repository (a statistics, text and calendar
// helper package with unittest tests). Each Bug is a commit that breaks one
// function; its Instance has that commit as base_commit, the fix as the gold
// patch, a test_patch adding the tests that catch it, and FAIL_TO_PASS /
// PASS_TO_PASS lists measured by running the tests with the host's python3
// before and after the fix, the way SWE-bench datasets are made.
package demo
