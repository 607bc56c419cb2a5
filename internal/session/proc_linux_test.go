package session

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestChildFilesFollowChildren: a shell's children listed through the
// descriptors kept open (childFiles) are those the files read by path
// list, read again each time: as a child starts and as it ends.
func TestChildFilesFollowChildren(t *testing.T) {
	if !haveChildrenFiles() {
		t.Skip("no /proc/<pid>/task/<tid>/children on this kernel")
	}
	cmd := exec.Command("bash", "-c", "sleep 60 & read; kill %1; wait; read")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := openChildFiles(cmd.Process.Pid)
	if c == nil {
		t.Fatal("openChildFiles: nil")
	}
	defer c.close()
	wait := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, want := c.list(cmd.Process.Pid), childrenFromFiles(cmd.Process.Pid)
			if len(got) == n && slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("children %v (by path %v), want %d", got, want, n)
			}
		}
	}
	wait(1)
	in.Write([]byte("\n")) // the sleep is killed and reaped
	wait(0)
}
