// Package sandbox creates, drives and closes sandboxes from the host.
//
// A Config describes a sandbox: its root layers (read-only lower dirs, bottom
// first) or the host's system directories, extra binds, working directory,
// environment, hostname, limits, network and user. A Runtime holds what all
// sandboxes of one msb process share: the state directory, the cgroup
// hierarchy and the mode (root, or rootless through a user namespace).
// Runtime.Create re-executes msb as the sandbox's init in new namespaces
// (see package sbinit for the inside) and returns a Sandbox: a handle that
// runs commands, persistent sessions and file operations over a control
// socket, and whose Close kills every process in it and removes everything
// it made.
//
// Every sandbox has a state directory (<state>/<id>) with its mount points
// (and, when its writable layer is a host directory, its upper and work
// dirs) and an owner lock. The owning msb process holds the lock for the
// sandbox's life; Runtime.GC removes the state, cgroups and processes of
// sandboxes whose owner is gone (a killed msb).
//
// A sandbox's disk bounds what it writes (Limits.DiskBytes): a volume of
// the host's disk pool in root mode (package pool), a tmpfs otherwise.
// Its stdio (Config.Stdio) is relayed through pipes. Runtime.Enforcement
// says what holds each limit in the runtime's mode, and what a sandbox can
// read of the host's files; docs/sandbox.md has the details.
package sandbox
