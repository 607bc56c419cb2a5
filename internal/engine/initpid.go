package engine

// InitPid is the host pid of the sandbox's init: /proc/<pid>/root is the
// sandbox's own view of its files (front ends watch them through it). A
// rollback in place keeps the init (its root is then the new one); a
// rollback that replaces the sandbox (rootless without nsenter, a failed
// reset) replaces it.
func (s *Sandbox) InitPid() int { return s.sbox().InitPid() }
