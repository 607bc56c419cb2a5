// Package sbinit is the sandbox side of msb: the code that runs inside the
// namespaces after msb re-executes itself.
//
// The sandbox's first process, PID 1 of its PID namespace, plays two roles
// in turn, separated by an exec of msb itself:
//
//   - init receives the Config over the control socket, builds the root
//     filesystem (overlay of the layers and the private upper dir, fresh
//     /proc, minimal /dev, private /tmp, read-only host system dirs, binds),
//     brings up loopback, pivots into the new root and cuts the capability
//     bounding set;
//   - the supervisor then sets no_new_privs, installs the seccomp filter and
//     serves the host's requests: sessions, one-shot commands, file
//     operations. Every process the agent runs descends from it and inherits
//     those restrictions. As PID 1 it also reaps the orphans reparented to
//     it, and the kernel shields it from signals sent inside the namespace
//     (`kill -9 -1` cannot take it down). When it exits, the kernel kills
//     everything left in the namespace.
//
// The supervisor holds exactly the capabilities, seccomp filter and user of
// the agent's processes, so it gives an agent nothing the agent does not
// already have. It stays dumpable: session frames reach the session pipes
// it holds through /proc/1/fd (see package session), which also means a
// deliberately hostile agent can tamper with the supervisor of its own
// sandbox and make it misreport that sandbox's results. Grading never
// trusts an agent's sandbox: it runs in a fresh one.
package sbinit
