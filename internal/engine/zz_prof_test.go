package engine

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

func TestZZProf(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.InitBinary = os.Getenv("SB") })
	ctx := context.Background()
	var ready, first, second []time.Duration
	for i := 0; i < 40; i++ {
		s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		if _, err := s.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		t3 := time.Now()
		ready = append(ready, s.task.ReadyTime)
		first = append(first, t2.Sub(t1))
		second = append(second, t3.Sub(t2))
		s.Close()
	}
	p := func(n string, d []time.Duration) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%s %v", n, d[len(d)/2])
	}
	p("ready", ready)
	p("first", first)
	p("second", second)
}
