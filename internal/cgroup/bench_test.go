package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStartInGroup compares, interleaved, the two ways a new process
// gets into a new v2 group: started, then moved there (Add: a write to
// cgroup.procs, which waits for an RCU grace period unless another move
// happened moments before) and cloned into it (CLONE_INTO_CGROUP, as a
// sandbox's init is on v2). It times Start and, for the moved process, Add;
// the group's creation and removal and the process's run are outside. It
// reports each way's median, in ns. A v1 or hybrid host has only the
// first way: skipped there.
func BenchmarkStartInGroup(b *testing.B) {
	info := Detect("")
	if info.Version != V2 || !CloneIntoSupported() {
		b.Skip("needs cgroup v2 with its controllers and clone3: " + info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		b.Fatal(err)
	}
	var moved, cloned []time.Duration
	for i := 0; i < b.N; i++ {
		for _, clone := range []bool{i%2 == 0, i%2 != 0} { // the order alternates
			d, err := startInGroup(info, fmt.Sprintf("bench-%d-%d-%v", os.Getpid(), i, clone), clone)
			if err != nil {
				b.Fatal(err)
			}
			if clone {
				cloned = append(cloned, d)
			} else {
				moved = append(moved, d)
			}
		}
	}
	b.ReportMetric(float64(median(moved)), "moved-p50-ns")
	b.ReportMetric(float64(median(cloned)), "cloned-p50-ns")
}

// startInGroup starts cat, waiting on a pipe (so that it is still there to
// be moved), in a new group, by a clone into it or a move after the start,
// and returns how long that took.
func startInGroup(info Info, name string, clone bool) (time.Duration, error) {
	g, err := Create(info, name, Limits{Pids: 8})
	if err != nil {
		return 0, err
	}
	defer g.Destroy()
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	var f *os.File
	if clone {
		if f, err = g.OpenForClone(); err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if !clone {
		err = g.Add(cmd.Process.Pid)
	}
	d := time.Since(start)
	in.Close()
	cmd.Wait()
	return d, err
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
