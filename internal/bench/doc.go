// Package bench measures msb against baselines in the same run, on the same
// machine, and reports medians, tails and ratios.
//
// A Sample is a list of durations; Stats summarizes one (p50, p95, mean).
// Each benchmark of sandbox start-up runs the same work, "create an isolated
// root, answer one command, tear down", three ways: msb, the paper's
// mechanism (unshare --mount, bind mounts of the host's system dirs, chroot,
// bash; as a shell pipeline) and `podman run --rm` where podman is installed.
package bench
