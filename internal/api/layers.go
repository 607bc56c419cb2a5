package api

// InstanceLayers is GET /v1/instances/{instance_id}/layers: the layers a
// task sandbox of the instance is made of (its environment, then its
// repository commit) and which of them this daemon's cache holds. A
// scheduler places the instance's work where Present is true, or has the
// chosen node pull the missing refs from a peer's msb cache serve before
// anything is built.
type InstanceLayers struct {
	InstanceID string            `json:"instance_id"`
	Layers     List[LayerStatus] `json:"layers"`
	// Present: every layer is in the cache; a sandbox builds nothing.
	Present bool `json:"present"`
}

// LayerStatus is one layer of an instance's task in one cache.
type LayerStatus struct {
	// Ref names the layer the same way on every node of the same base
	// and interpreter (env/<key>, repo/<owner>/<name>@<commit>).
	Ref string `json:"ref"`
	// Layer is what the ref points at here (empty when the ref is absent).
	Layer   string `json:"layer,omitempty"`
	Present bool   `json:"present"`
}
