// Package dataset reads task instances from the files datasets are published
// as, and checks each row.
//
// The nouns:
//
//   - Instance: one task. A repository at a base commit, a problem
//     statement, the gold patch, the test patch, and the tests that must go
//     from failing to passing (FAIL_TO_PASS) and stay passing
//     (PASS_TO_PASS). See docs/dataset-format.md for every field.
//   - Source: the dataset family a row follows, which decides the required
//     fields and what the gold patch means: SWE-bench (full, Lite,
//     Verified), SWE-Gym (SWE-bench's shape, other repositories), SWE-smith
//     (the gold "patch" introduces the bug; instances share an environment
//     by image_name), MultiSWEBench (Multi-SWE-bench's own row shape:
//     org/repo/number, base.sha, fix_patch, the p2p/f2p/s2p/n2p test maps
//     and the three recorded runs, kept in Instance.MultiSWE) and Custom
//     (our documented format).
//   - RowError: why one row was rejected (row number, instance id if it has
//     one, field). A bad row never stops the others.
//   - Filter: which instances to keep, by id list, id regular expression and
//     a Python-style slice "start:end" over what the other filters keep.
//
// Load reads JSON (an array of rows), JSON Lines and Parquet files, with
// FAIL_TO_PASS and PASS_TO_PASS given either as lists of strings or as
// strings holding a JSON list (as on dataset hubs).
package dataset
