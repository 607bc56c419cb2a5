// Package bench measures msb against baselines in the same run, on the same
// machine, and reports medians, tails and ratios, raw samples as CSV and
// plots as PNG.
//
// The nouns:
//
//   - A Workload is what a task holds: "bare" (the host's system dirs and a
//     shell, nothing else), "synthetic" (a generated repository sharing one
//     venv) or a real repository such as psf/requests (commits of a local
//     clone sharing one environment built with pip). Every method gets the
//     same /testbed and the same venv.
//   - A Method is one way of making a task: "msb" (the envcache layers in a
//     sandbox), "paper" (the SWE-MiniSandbox mechanism: tarballs of the venv
//     and the repository extracted per task, unshare --mount --pid --fork,
//     read-only binds of the host's system dirs and /dev, chroot, bash, and
//     rm -rf at the end), "podman" (SWE-bench-style base/env/instance images
//     built from the same content, one container per task), and for round
//     trips "raw" (a shell on a pipe, no isolation at all).
//   - A Measure is what a comparison measures: ready (create, first answer,
//     close), throughput, roundtrip, pss, disk, prep.
//   - A Round runs every method of a comparison once, in an order rotated by
//     one each round (Order), so drift of the machine's load falls on every
//     method alike. A cold trial first drops the page cache of the method's
//     own files (DropCache); a warm one does not.
//   - A Sample is one measured value; a Report holds all of a run's samples,
//     the machine they came from and what was skipped and why. Summaries
//     group samples and give p50, p95 and the ratio to each baseline.
package bench
