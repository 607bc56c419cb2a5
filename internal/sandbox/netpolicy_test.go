package sandbox

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want entry
		bad  bool
	}{
		{in: "1.2.3.4", want: entry{prefix: netip.MustParsePrefix("1.2.3.4/32")}},
		{in: "10.1.2.3/16", want: entry{prefix: netip.MustParsePrefix("10.1.0.0/16")}},
		{in: "1.2.3.4:443", want: entry{prefix: netip.MustParsePrefix("1.2.3.4/32"), port: 443}},
		{in: "0.0.0.0/0", want: entry{prefix: netip.MustParsePrefix("0.0.0.0/0")}},
		{in: "PyPI.org:443", want: entry{host: "pypi.org", port: 443}},
		{in: "localhost", want: entry{host: "localhost"}},
		{in: "model-proxy.internal.", want: entry{host: "model-proxy.internal"}},
		{in: "", bad: true},
		{in: ":80", bad: true},
		{in: "1.2.3.4:0", bad: true},
		{in: "1.2.3.4:65536", bad: true},
		{in: "1.2.3.4:http", bad: true},
		{in: "10.0.0.0/33", bad: true},
		{in: "1.2.3", bad: true}, // a mistyped address, not a host name
		{in: "::1", bad: true},
		{in: "fd00::/8", bad: true},
		{in: "*.example.com", bad: true},
		{in: "-bad.example", bad: true},
		{in: "a b", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseEntry(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed as %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestNetPolicyValidate(t *testing.T) {
	base := Config{HostBase: true}
	for _, tc := range []struct {
		name string
		conf func(c *Config)
		ok   bool
	}{
		{"filtered without policy", func(c *Config) { c.Network = NetworkFiltered }, true},
		{"filtered with policy", func(c *Config) {
			c.Network, c.NetPolicy = NetworkFiltered, &NetPolicy{Allow: []string{"127.0.0.1:80", "pypi.org"}, Deny: []string{"0.0.0.0/0"}}
		}, true},
		{"policy without filtered", func(c *Config) { c.NetPolicy = &NetPolicy{Deny: []string{"0.0.0.0/0"}} }, false},
		{"policy on host", func(c *Config) { c.Network, c.NetPolicy = NetworkHost, &NetPolicy{} }, false},
		{"bad allow", func(c *Config) { c.Network, c.NetPolicy = NetworkFiltered, &NetPolicy{Allow: []string{"10.0.0.0/99"}} }, false},
		{"bad deny", func(c *Config) { c.Network, c.NetPolicy = NetworkFiltered, &NetPolicy{Deny: []string{"*.com"}} }, false},
		{"unknown network", func(c *Config) { c.Network = "bridge" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.conf(&c)
			err := c.Validate(false)
			if tc.ok != (err == nil) {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%v is not ErrInvalidConfig", err)
			}
		})
	}
}

// hostsFile is a Resolver over a fixed table, as /etc/hosts would be.
type hostsFile map[string][]string

func (h hostsFile) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	as, ok := h[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestNetPolicyRuleset(t *testing.T) {
	hosts := hostsFile{"proxy.test": {"192.0.2.7", "192.0.2.8"}, "me.test": {"127.0.0.1"}}
	for _, tc := range []struct {
		name     string
		policy   NetPolicy
		want     []string // lines of the ruleset, in this order
		not      []string // lines it must not have
		loopback bool
	}{{
		name:   "allow list",
		policy: NetPolicy{Allow: []string{"proxy.test:443", "127.0.0.1:8000", "198.51.100.0/24"}, Deny: []string{"0.0.0.0/0"}},
		want: []string{
			`oif "lo" accept`,
			"ip daddr 10.0.2.2 tcp dport 8000 accept",
			"ip daddr 10.0.2.2 meta l4proto tcp reject with tcp reset",
			"ip daddr 10.0.2.3 udp dport 53 accept",
			"ip daddr 192.0.2.7/32 tcp dport 443 accept",
			"ip daddr 192.0.2.8/32 udp dport 443 accept",
			"ip daddr 198.51.100.0/24 accept",
			"ip daddr 0.0.0.0/0 meta l4proto tcp reject with tcp reset",
			"meta nfproto ipv6 reject with icmpx type admin-prohibited",
		},
		not:      []string{"127.0.0.1"},
		loopback: true,
	}, {
		name:   "deny list",
		policy: NetPolicy{Deny: []string{"192.0.2.0/24", "198.51.100.1:25"}},
		want: []string{
			"ip daddr 10.0.2.2 reject with icmpx type admin-prohibited",
			"ip daddr 192.0.2.0/24 meta l4proto tcp reject with tcp reset",
			"ip daddr 198.51.100.1/32 tcp dport 25 reject with tcp reset",
			"ip daddr 198.51.100.1/32 udp dport 25 reject with icmpx type admin-prohibited",
		},
		not: []string{"10.0.2.3", "10.0.2.2 tcp dport"},
	}, {
		name:     "a host name that is the host's loopback",
		policy:   NetPolicy{Allow: []string{"me.test:9000"}, Deny: []string{"0.0.0.0/0", "127.0.0.1"}},
		want:     []string{"ip daddr 10.0.2.2 tcp dport 9000 accept", "ip daddr 10.0.2.3 tcp dport 53 accept"},
		not:      []string{"127.0.0.1"},
		loopback: true,
	}, {
		name:   "everything but the host's loopback",
		policy: NetPolicy{Allow: []string{"0.0.0.0/0"}},
		want:   []string{"ip daddr 10.0.2.2 meta l4proto tcp reject with tcp reset", "ip daddr 0.0.0.0/0 accept"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.policy.resolve(context.Background(), hosts)
			if err != nil {
				t.Fatal(err)
			}
			rs := r.ruleset()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(rs[at:], "\t\t"+w+"\n")
				if i < 0 {
					t.Fatalf("ruleset lacks %q after byte %d:\n%s", w, at, rs)
				}
				at += i
			}
			for _, n := range tc.not {
				if strings.Contains(rs, n) {
					t.Fatalf("ruleset has %q:\n%s", n, rs)
				}
			}
			if r.hostLoopback() != tc.loopback {
				t.Fatalf("hostLoopback %v, want %v", r.hostLoopback(), tc.loopback)
			}
		})
	}
}

func TestNetPolicyUnresolvable(t *testing.T) {
	p := NetPolicy{Allow: []string{"nowhere.test"}}
	_, err := p.resolve(context.Background(), hostsFile{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "nowhere.test") {
		t.Fatalf("got %v, want ErrInvalidConfig naming the host", err)
	}
}
