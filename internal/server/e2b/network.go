package e2b

import "github.com/minisandbox/msb/internal/engine"

// networkRules are a create's network rules as the SDK sends them
// (SandboxNetworkConfig): allowOut beats denyOut; allowPublicTraffic
// false puts the sandbox's URLs behind a traffic access token
// (ingress.go), whose servers on httpsPorts speak HTTPS. The other fields
// (dnsServers, rules, egress proxy) are accepted and ignored.
type networkRules struct {
	AllowOut           []string `json:"allowOut"`
	DenyOut            []string `json:"denyOut"`
	AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	MaskRequestHost    *string  `json:"maskRequestHost"`
	HTTPSPorts         []int    `json:"httpsPorts"`
}

// allTraffic is what E2B's allow_internet_access false denies.
const allTraffic = "0.0.0.0/0"

// networkOf maps a create's allow_internet_access (nil: not sent) and
// network rules (nil: none) to the engine's network and policy. msb's
// default stays no network: a create that says nothing gets loopback
// only, where E2B's cloud would give the internet. Internet off and no
// allowOut is no route at all; anything else is a filtered sandbox, with
// internet off adding denyOut 0.0.0.0/0 as E2B documents it.
func networkOf(internet *bool, n *networkRules) (string, *engine.NetPolicy) {
	var rules networkRules
	if n != nil {
		rules = *n
	}
	off := internet != nil && !*internet
	switch {
	case off && len(rules.AllowOut) == 0:
		return engine.NetworkNone, nil
	case internet == nil && len(rules.AllowOut) == 0 && len(rules.DenyOut) == 0:
		return engine.NetworkNone, nil
	}
	p := &engine.NetPolicy{Allow: rules.AllowOut, Deny: rules.DenyOut}
	if off {
		p.Deny = append([]string{allTraffic}, p.Deny...)
	}
	if len(p.Allow) == 0 && len(p.Deny) == 0 {
		p = nil
	}
	return engine.NetworkFiltered, p
}
