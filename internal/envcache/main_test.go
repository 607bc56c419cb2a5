package envcache

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/spec"
)

// builderEnv makes the test binary a builder process (for the crash test):
// it reads a job from the variable, prepares it, printing each phase event
// on stdout, and exits.
const builderEnv = "MSB_ENVCACHE_TEST_BUILDER"

type builderJob struct {
	Dir   string           `json:"dir"`
	State string           `json:"state"`
	Inst  dataset.Instance `json:"inst"`
	Spec  spec.Spec        `json:"spec"`
	Opts  Options          `json:"-"`
	Site  bool             `json:"site"`
	Wheel string           `json:"wheel"`
}

func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	if job := os.Getenv(builderEnv); job != "" {
		os.Exit(runBuilder(job))
	}
	os.Exit(privtest.RunChecked(m, privtest.Checks{OwnPool: true, Mounts: "msb-envcache-test"}))
}

func runBuilder(s string) int {
	var j builderJob
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		fmt.Println("bad job:", err)
		return 2
	}
	rt, err := testRuntimeAt(j.State)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	c, err := Open(Options{Dir: j.Dir, Runtime: rt, SystemSitePackages: j.Site, Wheelhouse: j.Wheel})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := c.Prepare(ctx, j.Inst, j.Spec, func(e Event) {
		fmt.Printf("event %s done=%v\n", e.Phase, e.Done)
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	p.Release()
	fmt.Println("prepared")
	return 0
}
