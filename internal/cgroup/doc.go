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
// it only where the hierarchy was delegated (MSB_CGROUP_PARENT names a
// directory there: in a v2 hierarchy, or in a v1 one, whose path is then
// used in each v1 hierarchy). Where neither holds, Detect says so and
// callers fall back to rlimits.
package cgroup
