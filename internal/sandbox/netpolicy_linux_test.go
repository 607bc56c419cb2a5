package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestNetPolicy runs filtered sandboxes against listeners on the host's
// 127.0.0.1 only (no packet leaves the machine): what the policy allows
// connects, what it does not is refused at once, the agent cannot lift
// the rules, and the forwarder ends with the sandbox. TestNetPolicyRootless
// reruns it as an unprivileged user.
func TestNetPolicy(t *testing.T) {
	if _, err := lookForwarder(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	rt := testRuntime(t)
	open, closed := privtest.ServeOK(t), privtest.ServeOK(t)
	// connect prints what the listener at port of the host's loopback
	// says, bounded: a refused or dropped connection fails within 5s.
	connect := func(port int) string {
		return fmt.Sprintf("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d && head -c2 <&3'", HostLoopback, port)
	}

	t.Run("AllowList", func(t *testing.T) {
		sb := create(t, rt, Config{HostBase: true, Network: NetworkFiltered,
			NetPolicy: &NetPolicy{Allow: []string{"127.0.0.1:" + strconv.Itoa(open)}, Deny: []string{"0.0.0.0/0"}}})
		if got := mustOK(t, sb, connect(open)); got != "ok" {
			t.Fatalf("allowed port said %q", got)
		}
		refused(t, sb, connect(closed))
		// The agent is root in the sandbox but has no CAP_NET_ADMIN in
		// its network namespace: the rules stay.
		out := mustFail(t, sb, "nft flush ruleset")
		t.Logf("nft flush ruleset in the sandbox: %s", strings.TrimSpace(out))
		mustFail(t, sb, "ip route del default")
		refused(t, sb, connect(closed))
		if got := mustOK(t, sb, connect(open)); got != "ok" {
			t.Fatalf("allowed port after the agent's attempts said %q", got)
		}
		if got := mustOK(t, sb, "cat /etc/resolv.conf"); got != resolvConf {
			t.Fatalf("resolv.conf %q", got)
		}
		pid := sb.fwd.cmd.Process.Pid
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
			t.Fatalf("forwarder %d still there after Close: %v", pid, err)
		}
	})

	t.Run("AllowBeatsDeny", func(t *testing.T) {
		sb := create(t, rt, Config{HostBase: true, Network: NetworkFiltered,
			NetPolicy: &NetPolicy{Allow: []string{"localhost"}, Deny: []string{"10.0.2.0/24"}}})
		for _, p := range []int{open, closed} {
			if got := mustOK(t, sb, connect(p)); got != "ok" {
				t.Fatalf("port %d of an allowed host said %q", p, got)
			}
		}
	})

	t.Run("HostLoopbackClosedByDefault", func(t *testing.T) {
		// No policy: everything but the host's loopback, which the
		// forwarder does not map either.
		sb := create(t, rt, Config{HostBase: true, Network: NetworkFiltered})
		refused(t, sb, connect(open))
		if got := mustOK(t, sb, "ip route show default"); !strings.Contains(got, "via "+forwarderGateway+" dev "+forwarderTap) {
			t.Fatalf("no route out through the forwarder: %q", got)
		}
	})

	t.Run("InternetOff", func(t *testing.T) {
		sb := create(t, rt, Config{HostBase: true, Network: NetworkNone})
		out := mustFail(t, sb, connect(open)+" 2>&1")
		// 10.0.2.2 is on eth0's subnet, where no neighbour answers.
		if !strings.Contains(out, "No route to host") {
			t.Fatalf("with no network the connect said %q, want no route", out)
		}
	})

	t.Run("ForwarderMissing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		saved := forwarderSbin
		forwarderSbin = nil
		t.Cleanup(func() { forwarderSbin = saved })
		sb, err := rt.Create(context.Background(), Config{HostBase: true, Network: NetworkFiltered})
		if err == nil {
			sb.Close()
			t.Fatal("created a filtered sandbox without slirp4netns")
		}
		if !errors.Is(err, ErrNoForwarder) {
			t.Fatalf("got %v, want ErrNoForwarder", err)
		}
	})

	t.Run("BadEntry", func(t *testing.T) {
		_, err := rt.Create(context.Background(), Config{HostBase: true, Network: NetworkFiltered,
			NetPolicy: &NetPolicy{Allow: []string{"10.0.0.0/40"}}})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("got %v, want ErrInvalidConfig", err)
		}
	})
}

func TestNetPolicyRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestNetPolicy$")
}

// refused checks that cmd (a connect) fails because the policy refused it:
// a reset, not the 5 seconds of its timeout (exit 124).
func refused(t *testing.T, sb *Sandbox, cmd string) {
	t.Helper()
	res := sh(t, sb, cmd+" 2>&1")
	if res.ExitCode == 0 || res.ExitCode == 124 || !strings.Contains(res.Output, "refused") {
		t.Fatalf("%s: exit %d, %q; want connection refused", cmd, res.ExitCode, res.Output)
	}
}
