// Package sudo is sudo for a sandbox whose processes cannot gain
// privileges: every process of a sandbox runs with no_new_privs (set with
// its seccomp filter), so a setuid sudo gains nothing and refuses to run.
//
// Instead the sandbox's init binary is bound read-only at a path of its
// root (sandbox.Config.Sudo, e.g. /usr/bin/sudo). Run under the name sudo,
// that binary is the client (Main): it reads sudo's options, works out
// the target user's ids, groups and environment from the sandbox's own
// /etc/passwd and /etc/group, and sends a Request, with its stdin, stdout
// and stderr as descriptors, to the sandbox's supervisor over the Unix
// socket Socket (in the sandbox's own /dev, which only its processes
// reach). The supervisor starts the command as that user in the same
// sandbox, on those descriptors, and answers its exit status (Reply).
// Signals the client gets (Control) are passed on to the command, and a
// client that goes away kills it. Run from a terminal, the client gives
// the command a new pseudo-terminal of its own, as Debian's sudo does
// (use_pty): see terminal, and Monitor for the process that leads the
// command's session, through which Ctrl-Z stops sudo with its command.
//
// The supervisor holds the sandbox user's credentials and nothing more
// (package sbinit), so sudo starts nothing its own user could not: in a
// sandbox that runs as root and drops to another user for some commands
// (E2B's user), it gives that user the sandbox's root, as the
// passwordless sudo of E2B's templates does, and no more.
package sudo
