package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// TestMain lets the test binary serve as the sandbox's init (it re-executes
// itself, as msb does) and checks, after all tests, that nothing leaked.
func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	code := m.Run()
	if code == 0 {
		if err := checkNoLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkNoLeaks fails when a sandbox process, a mount of a sandbox or a
// sandbox cgroup survived the tests.
func checkNoLeaks() error {
	var leaks []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), "msb-sandbox-") {
			leaks = append(leaks, "process "+p.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, "/msb-test-state") {
				leaks = append(leaks, "mount: "+line)
			}
		}
	}
	if len(leaks) > 0 {
		return fmt.Errorf("%d leaks:\n%s", len(leaks), strings.Join(leaks, "\n"))
	}
	return nil
}
