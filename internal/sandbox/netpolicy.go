package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// A filtered sandbox (Config.Network NetworkFiltered) keeps a network
// namespace of its own and reaches the outside through a forwarder msb
// runs for it (slirp4netns: user-mode networking, the sandbox's packets
// become the host's sockets). In the sandbox the forwarder's network is
// forwarderCIDR: the sandbox is forwarderGuest on forwarderTap, its gateway
// forwarderGateway (which is also the host's 127.0.0.1, when the policy lets
// it be), its resolver forwarderDNS. A sandbox without a network has the
// same interface and address, without a forwarder (see sandboxIface).
const (
	forwarderCIDR    = "10.0.2.0/24"
	forwarderGuest   = "10.0.2.100/24" // slirp4netns's default for forwarderCIDR
	forwarderGateway = "10.0.2.2"
	forwarderDNS     = "10.0.2.3"
	forwarderTap     = "eth0" // as a container's
	forwarderMTU     = 65520
)

// HostLoopback is the address in a filtered sandbox of the host's
// 127.0.0.1, reachable only on the ports a NetPolicy's Allow names.
const HostLoopback = forwarderGateway

// ErrNoForwarder: a filtered sandbox needs a program this host lacks
// (slirp4netns, nft or nsenter); the message names it.
var ErrNoForwarder = errors.New("network forwarder unavailable")

// NetPolicy is what a filtered sandbox may reach, E2B's rules: a
// destination an Allow entry matches is reachable; else one a Deny entry
// matches is not; else it is. So Deny ["0.0.0.0/0"] with an Allow list
// lets the sandbox reach those entries and nothing else, Deny alone all
// but those, and neither everything.
//
// An entry is an IPv4 address or CIDR, or a host name, with an optional
// ":port" (TCP and UDP): "10.1.0.0/16", "1.2.3.4:443", "pypi.org:443".
// Host names are resolved once, when the sandbox is created: an address
// the name gets later is not in the rules (recreate the sandbox to follow
// it). An Allow entry with a host name also lets the sandbox reach the
// forwarder's resolver (HostLoopback's neighbour 10.0.2.3, port 53).
//
// The host's loopback (its 127.0.0.1, reached as HostLoopback) is never
// reachable unless an Allow entry names it: "127.0.0.1:8000" or
// "localhost:8000" (any address of 127.0.0.0/8, or a name that resolves
// to one, names it; no other entry, not even 0.0.0.0/0, does).
type NetPolicy struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// netRule is one entry, resolved: the addresses it covers and its port
// (0: all), or the host's loopback.
type netRule struct {
	prefixes []netip.Prefix
	port     uint16
	loopback bool // the host's loopback, reached at forwarderGateway
}

// netRules is a policy resolved for one sandbox.
type netRules struct {
	allow, deny []netRule
	// dns: an Allow entry was a host name, so the forwarder's resolver is
	// reachable.
	dns bool
}

// hostLoopback reports whether the rules let the sandbox reach the host's
// loopback at all (the forwarder then maps forwarderGateway to it).
func (r netRules) hostLoopback() bool {
	for _, a := range r.allow {
		if a.loopback {
			return true
		}
	}
	return false
}

var loopbackNet = netip.MustParsePrefix("127.0.0.0/8")

// entry is one policy entry, parsed: the address part and the port.
type entry struct {
	prefix netip.Prefix // valid for an address or CIDR
	host   string       // else a host name
	port   uint16
}

// parseEntry parses "ADDR", "ADDR/BITS" or "HOST", each with an optional
// ":PORT".
func parseEntry(s string) (entry, error) {
	var e entry
	addr, port, hasPort := strings.Cut(s, ":")
	if hasPort {
		if strings.Contains(port, ":") {
			return e, fmt.Errorf("%q: IPv6 is not forwarded; give an IPv4 address, CIDR or host name", s)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return e, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
		}
		e.port = uint16(p)
	}
	if addr == "" {
		return e, fmt.Errorf("%q: no address or host name", s)
	}
	if strings.Contains(addr, "/") {
		p, err := netip.ParsePrefix(addr)
		if err != nil || !p.Addr().Is4() {
			return e, fmt.Errorf("%q: not an IPv4 CIDR such as 10.0.0.0/8", s)
		}
		e.prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		if !a.Is4() {
			return e, fmt.Errorf("%q: IPv6 is not forwarded; give an IPv4 address, CIDR or host name", s)
		}
		e.prefix = netip.PrefixFrom(a, 32)
		return e, nil
	}
	if !validHostName(addr) {
		return e, fmt.Errorf("%q: not an IPv4 address, CIDR or host name (wildcards are not supported)", s)
	}
	e.host = strings.ToLower(strings.TrimSuffix(addr, "."))
	return e, nil
}

// validHostName reports whether s is a DNS name: labels of letters, digits
// and inner hyphens (underscores allowed), at most 253 bytes, not all
// digits and dots (that would be a mistyped address).
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	digits := true
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
				digits = false
			case c >= '0' && c <= '9':
			default:
				return false
			}
		}
	}
	return !digits
}

// check parses every entry without resolving host names: what Validate
// can say before the sandbox is made.
func (p *NetPolicy) check() error {
	for _, list := range []struct {
		what    string
		entries []string
	}{{"allow", p.Allow}, {"deny", p.Deny}} {
		for _, s := range list.entries {
			if _, err := parseEntry(s); err != nil {
				return invalid("network %s entry %v", list.what, err)
			}
		}
	}
	return nil
}

// Resolver looks up a host name's addresses (net.DefaultResolver does).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolve turns the policy into rules, looking up its host names with r.
// A name that does not resolve, or only to IPv6, is ErrInvalidConfig.
func (p *NetPolicy) resolve(ctx context.Context, r Resolver) (netRules, error) {
	var out netRules
	for _, s := range p.Allow {
		rule, host, err := resolveEntry(ctx, r, s)
		if err != nil {
			return out, invalid("network allow entry %v", err)
		}
		out.allow = append(out.allow, rule)
		out.dns = out.dns || host
	}
	for _, s := range p.Deny {
		rule, _, err := resolveEntry(ctx, r, s)
		if err != nil {
			return out, invalid("network deny entry %v", err)
		}
		out.deny = append(out.deny, rule)
	}
	return out, nil
}

// resolveEntry resolves one entry; host says it named a host.
func resolveEntry(ctx context.Context, r Resolver, s string) (rule netRule, host bool, err error) {
	e, err := parseEntry(s)
	if err != nil {
		return rule, false, err
	}
	rule.port = e.port
	if e.host == "" {
		rule.prefixes = []netip.Prefix{e.prefix}
		rule.loopback = loopbackNet.Contains(e.prefix.Addr())
		return rule, false, nil
	}
	addrs, err := r.LookupNetIP(ctx, "ip4", e.host)
	if err != nil {
		return rule, true, fmt.Errorf("%q: resolving %s: %w", s, e.host, err)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if loopbackNet.Contains(a) {
			rule.loopback = true
			continue
		}
		rule.prefixes = append(rule.prefixes, netip.PrefixFrom(a, 32))
	}
	if len(rule.prefixes) == 0 && !rule.loopback {
		return rule, true, fmt.Errorf("%q: %s has no IPv4 address", s, e.host)
	}
	return rule, true, nil
}

// defaultResolver is what a filtered sandbox's host names are resolved with.
var defaultResolver Resolver = net.DefaultResolver

// ruleset is the nftables ruleset that holds r in the sandbox's network
// namespace: one output chain, tried in order, whose first match decides.
// The sandbox's own loopback is always open; the host's (at
// forwarderGateway) only on what Allow names; the resolver when a host
// was named; then Allow, then Deny; IPv6 has no route out and is refused.
// Refused connections fail at once (a TCP reset, an ICMP
// administratively-prohibited), so a denied connect never hangs.
func (r netRules) ruleset() string {
	var b strings.Builder
	b.WriteString("table inet msb {\n\tchain output {\n\t\ttype filter hook output priority 0; policy accept;\n")
	line := func(format string, args ...any) {
		b.WriteString("\t\t")
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\n")
	}
	line(`oif "lo" accept`)
	for _, a := range r.allow {
		if a.loopback {
			verdict(line, "ip daddr "+forwarderGateway, a.port, "accept")
		}
	}
	verdict(line, "ip daddr "+forwarderGateway, 0, "reject")
	if r.dns {
		verdict(line, "ip daddr "+forwarderDNS, 53, "accept")
	}
	for _, a := range r.allow {
		for _, p := range a.prefixes {
			if !loopbackNet.Contains(p.Addr()) {
				verdict(line, "ip daddr "+p.String(), a.port, "accept")
			}
		}
	}
	for _, d := range r.deny {
		for _, p := range d.prefixes {
			if !loopbackNet.Contains(p.Addr()) { // closed unless allowed
				verdict(line, "ip daddr "+p.String(), d.port, "reject")
			}
		}
	}
	verdict(line, "meta nfproto ipv6", 0, "reject")
	b.WriteString("\t}\n}\n")
	return b.String()
}

// verdict writes the rules that give what match (and port, when not 0)
// selects the verdict accept or reject.
func verdict(line func(string, ...any), match string, port uint16, v string) {
	switch {
	case v == "accept" && port == 0:
		line("%s accept", match)
	case v == "accept":
		line("%s tcp dport %d accept", match, port)
		line("%s udp dport %d accept", match, port)
	case port == 0:
		line("%s meta l4proto tcp reject with tcp reset", match)
		line("%s reject with icmpx type admin-prohibited", match)
	default:
		line("%s tcp dport %d reject with tcp reset", match, port)
		line("%s udp dport %d reject with icmpx type admin-prohibited", match, port)
	}
}

// resolvConf is the sandbox's /etc/resolv.conf: the forwarder's resolver.
const resolvConf = "nameserver " + forwarderDNS + "\n"
