package e2b

import (
	"net/http"
)

// updateNetwork is PUT /sandboxes/{id}/network (the SDK's
// update_network). msb sets a sandbox's network when it starts it: the
// forwarder (slirp4netns) and, in filtered mode, the nft ruleset of its
// namespace, with host names resolved once. Changing them on a running
// sandbox is not implemented, so a known sandbox gets a 501 that says so
// (the SDK raises it as a SandboxException), an unknown one the 404 of
// the other sandbox routes.
func (f *Front) updateNetwork(w http.ResponseWriter, r *http.Request) {
	if f.live(r.PathValue("id")) == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	var body map[string]any
	if err := decode(r, &body); err != nil {
		engineError(w, err)
		return
	}
	writeJSON(w, http.StatusNotImplemented, map[string]any{"code": http.StatusNotImplemented,
		"message": "msb cannot change the network of a running sandbox: its rules are set when it starts " +
			"(create it with allow_internet_access and network={allow_out, deny_out}; see docs/e2b.md)"})
}
