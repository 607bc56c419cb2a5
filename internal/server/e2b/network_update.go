package e2b

import (
	"errors"
	"net/http"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// networkUpdate is the body of PUT /sandboxes/{id}/network (the SDK's
// update_network): the sandbox's whole egress configuration, what it
// omits cleared.
type networkUpdate struct {
	AllowInternetAccess *bool    `json:"allowInternetAccess"`
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
}

// policy is the rules u asks for, as a create's (networkOf) but for a
// sandbox that has the filtered network already: nothing asked is all
// but the host's loopback, the internet off without allowOut is nothing.
func (u networkUpdate) policy() *engine.NetPolicy {
	network, p := networkOf(u.AllowInternetAccess, &networkRules{AllowOut: u.AllowOut, DenyOut: u.DenyOut})
	if network == engine.NetworkNone && u.AllowInternetAccess != nil && !*u.AllowInternetAccess {
		return &engine.NetPolicy{Deny: []string{allTraffic}}
	}
	return p
}

// updateNetwork replaces the network rules of a running sandbox: the
// sandbox layer reloads its nft ruleset in place. Only a sandbox created
// with a filtered network (allow_internet_access or rules) has rules to
// change; any other is a 409 that says so, as is a change that would open
// the host's loopback to a sandbox started without it.
func (f *Front) updateNetwork(w http.ResponseWriter, r *http.Request) {
	b := f.running(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	var u networkUpdate
	if err := decode(r, &u); err != nil {
		engineError(w, err)
		return
	}
	sid, _ := b.engineID()
	sb, err := f.e.Sandbox(sid)
	if err == nil {
		err = sb.UpdateNetPolicy(r.Context(), u.policy())
	}
	if errors.Is(err, engine.ErrNetworkFixed) {
		apiError(w, api.CodeConflict, "%v", err)
		return
	}
	if err != nil {
		engineError(w, err)
		return
	}
	b.mu.Lock()
	b.policy = u.policy()
	b.mu.Unlock()
	b.logf("info", nil, "network rules updated")
	w.WriteHeader(http.StatusNoContent)
}
