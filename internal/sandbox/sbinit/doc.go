// Package sbinit is the sandbox side of msb: the code that runs inside the
// namespaces after msb re-executes itself.
//
// The sandbox's first process, PID 1 of its PID namespace, plays two roles
// in turn, in one Go runtime:
//
//   - init receives the Config over the control socket, builds the root
//     filesystem (overlay of the layers and the private upper dir, /tmp
//     a directory of the root, fresh /proc, minimal /dev, read-only host
//     system dirs, binds),
//     brings up loopback, pivots into the new root, and on its locked
//     thread enters a new cgroup namespace and cuts the capability bounding
//     set; every thread of the process is left only the capabilities kept
//     (one syscall.AllThreadsSyscall);
//   - the supervisor then sets no_new_privs, installs the seccomp filter and
//     serves the host's requests: sessions, one-shot commands, file
//     operations. Every process the agent runs is forked from init's locked
//     thread (the spawner), descends from it and inherits those
//     restrictions. As PID 1 it also reaps the orphans reparented to it,
//     and the kernel shields it from signals sent inside the namespace
//     (`kill -9 -1` cannot take it down). When it exits, the kernel kills
//     everything left in the namespace.
//
// A binary built with cgo cannot act on all its threads: there init execs
// itself as the supervisor, passing the config on a memfd, and the new
// image's threads all descend from the cut thread.
//
// The supervisor holds exactly the capabilities, seccomp filter and user of
// the agent's processes, so it gives an agent nothing the agent does not
// already have, and it is not dumpable: without CAP_SYS_PTRACE, which no
// process of the sandbox has, nothing reaches its memory, its descriptors
// (the control socket) or its environment through /proc or pidfd_getfd.
// Its config is never in its environment. Sessions' frames
// reach the pipes it holds as named pipes in wire.SessionDir (see package
// session), which the agent can reach too: it can tamper with its own
// sessions, not with the supervisor or what one-shot commands report.
//
// Nothing else reaches the supervisor or the agent's processes: init closes
// every descriptor msb's caller left open before it builds anything, and
// its stdio are pipes the host relays (never the caller's files).
package sbinit
