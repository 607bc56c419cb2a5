// Package cgroup puts a sandbox's processes in a control group of their own,
// enforces its limits and reads its usage.
//
// A Group is one sandbox's cgroup. On a unified (v2) hierarchy it is one
// directory; on a legacy (v1) or hybrid host it is one directory in each of
// the memory, pids and cpu hierarchies. Limits are memory bytes (swap
// included where the kernel can limit it), a process count and a CPU quota.
// Usage reports what the kernel counted, including OOM kills.
//
// Groups are created below a parent named "msb" in the caller's own cgroup,
// so a host-level limit on msb also bounds its sandboxes. Creating a group
// needs write access to the hierarchy: root has it; an unprivileged user has
// it where the cgroup msb starts in was delegated to them (systemd's
// Delegate=yes, or an administrator's chown), or below MSB_CGROUP_PARENT, a
// directory in a delegated v2 hierarchy or in a v1 one, whose path is then
// used in each v1 hierarchy. On v2 a cgroup with processes cannot give its
// children controllers, so msb moves itself into a leaf (SelfLeaf) next to
// its parent first; root falls back to a parent at the top of the hierarchy
// where that cannot be done. Rootless on v2, JoinSystemdScope gets msb a
// cgroup of its own from the user's systemd (a transient scope with
// Delegate=yes). Where nothing is writable, Detect says so and callers fall
// back to rlimits.
//
// A process gets into its group in one of three ways: moved there by pid
// (Add), which waits for an RCU grace period; cloned into it on v2
// (OpenForClone, CLONE_INTO_CGROUP); or, on v1, forked from a thread that
// moved itself into the group for the fork (StartInside), which does not.
package cgroup
