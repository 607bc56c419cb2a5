package engine

// InitPid is the host pid of the sandbox's init: /proc/<pid>/root is the
// sandbox's own view of its files (front ends watch them through it). A
// rollback replaces the init.
func (s *Sandbox) InitPid() int { return s.sbox().InitPid() }
