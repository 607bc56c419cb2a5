// Package checkpoint carries a sandbox's running processes from one
// sandbox to another with CRIU (criu(8), 4.x): a dump writes the memory,
// descriptors and namespaces of every process of a sandbox (its init, the
// supervisor, and all it started) to an images directory, and a restore
// starts them again over a new root, where they go on from where they were.
//
// Terms:
//   - a Dump is an images directory plus its Manifest (checkpoint.json):
//     what the restore has to supply because it lies outside the sandbox.
//   - an external mount is a mount of the sandbox whose filesystem the
//     sandbox did not make: a host directory or device bound in (/usr,
//     /etc, /dev/null), its cgroups, its disk. CRIU does not copy them;
//     the restore binds a host path in their place (Mount.Source, or
//     RestoreOptions.Mounts).
//   - an external file is a descriptor or mapped file of a process that
//     lies on a mount the sandbox cannot see: the supervisor's own binary
//     and the cgroup files the Go runtime keeps open. The restore reopens
//     it by its host path (File.Path) and hands it to CRIU.
//   - the control socket is init's fd 3, whose other end is msb's. A
//     restore gives the restored supervisor a new socketpair's end in its
//     place and returns the other (Restored.Control): msb speaks to the
//     restored sandbox over it as over any sandbox's (package wire).
//
// What it needs and what it cannot do (docs/engine.md, "Snapshots, fork
// and rollback"): criu 4.x whose "criu check" passes (Debian 12's 3.17.1 fails on kernel 6.18; .ci/deps
// builds 4.1.1 from Debian's source); root (an unprivileged CRIU cannot
// suspend the seccomp filter of the sandbox's processes: PTRACE_O_SUSPEND_SECCOMP
// needs CAP_SYS_ADMIN); a control socket in the sandbox's network namespace
// (CRIU dumps no socket of a namespace it does not dump): a sandbox on the
// host's network, or one with a namespace of its own made ahead
// (sandbox.RuntimeOptions.NetSpares), whose socketpair msb makes in it, not
// one whose init's clone made its namespace. Such a namespace is left out
// of the dump (Manifest.Netns): a restore puts the processes into one the
// caller made (RestoreOptions.Netns), with the new control socketpair made
// in it (RestoreOptions.Control), so that a restored sandbox is dumped
// again as a created one is. It needs an init that leads its session (the
// supervisor makes it). A dump can be restored many times, each copy into
// cgroups of its own (RestoreOptions.CgroupRoots); the host directories
// are bound through an idmapped mount again where they were
// (RestoreOptions.Idmap).
//
// Managed sandboxes: package sandbox knows no dump. sandbox.Runtime.Restore
// makes a new sandbox's state dir, disk, cgroups, root, network namespace
// and control socketpair on the host and hands them
// (sandbox.RestoreTarget) to a sandbox.Restorer, which
// Criu.Restorer gives for a dump of Criu.DumpSandbox: the result is an
// ordinary sandbox.Sandbox. A dump of a frozen sandbox (DumpOptions.
// FreezeCgroup) leaves it frozen, so that the caller reads its files in the
// same freeze (the engine's fork with processes, docs/engine.md).
package checkpoint
