package bench

import (
	"context"
	"os"
	"testing"
)

// TestReadyAnswersInAKeptShell checks the ready measure's one criterion
// of an answer: every method's commands go to a shell its task keeps (a
// variable the first command sets is there for the second), as the
// paper's always do, never to a new shell per command for some methods
// only.
func TestReadyAnswersInAKeptShell(t *testing.T) {
	rt := testRuntime(t)
	b := &bencher{o: Options{Work: t.TempDir()}, rt: rt}
	if err := os.MkdirAll(b.tasksDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	ms, closeSpare := b.readyMethods(bareWorkload())
	defer closeSpare()
	ctx := context.Background()
	for _, m := range ms {
		t.Run(m.name(), func(t *testing.T) {
			if a, ok := m.(aheadMaker); ok {
				if err := a.makeAhead(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			task, err := m.create(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := task.close(); err != nil {
					t.Error(err)
				}
			}()
			if err := task.run(ctx, "kept=yes"); err != nil {
				t.Fatal(err)
			}
			if err := task.run(ctx, `test "$kept" = yes`); err != nil {
				t.Errorf("the second command did not run in the first one's shell: %v", err)
			}
		})
	}
}
