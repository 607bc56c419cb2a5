package task

import (
	"context"
	"fmt"

	"github.com/minisandbox/msb/internal/sandbox"
)

// CanResetToStart says whether ResetToStart can put the sandbox back in
// its starting state in place, and if not, why (a
// sandbox.ErrResetUnsupported): only a sandbox Open started over the
// prepared layers can (one Start made, a fork's, has no starting state of
// its own), and only where its sandbox can be reset (sandbox.CanReset).
func (s *Sandbox) CanResetToStart() error {
	if len(s.prep.Layers) == 0 || s.prep.Lease == nil {
		return fmt.Errorf("%w: the task sandbox was not opened over its prepared layers", sandbox.ErrResetUnsupported)
	}
	return s.CanReset()
}

// ResetToStart puts a sandbox Open started back in its starting state,
// in place: the sandbox is reset to the prepared layers, which the
// sandbox's own lease keeps (sandbox.Sandbox.Reset: its processes killed,
// its writes dropped), and the starting state is made again as Open made
// it (a SWE-smith bug committed). An error after the reset leaves the
// sandbox without its starting state: close it then.
func (s *Sandbox) ResetToStart(ctx context.Context) error {
	if err := s.CanResetToStart(); err != nil {
		return err
	}
	if err := s.Reset(ctx, sandbox.Deferred{Layers: s.prep.Layers, Owners: s.prep.Owners}); err != nil {
		return err
	}
	if s.Task.Instance.BugIsGoldPatch() {
		return s.commitBug(ctx)
	}
	return nil
}
