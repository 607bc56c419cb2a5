package sandbox

// mountPaths are the paths d's layers are mounted from: d.Mount when
// given, else d.Layers. A layer being published is complete before it is
// in its place (a fork's snapshot: the engine's early tree), and is then
// mounted from where it is now (its temp dir in the store's layers/)
// while the sandbox's Config names its place. The store renames it there
// only once the mounts in flight are made (store.Early.Place waits for
// them); a mount made follows the tree when it is renamed.
func (d Deferred) mountPaths() []string {
	if len(d.Mount) == len(d.Layers) && d.Mount != nil {
		return d.Mount
	}
	return d.Layers
}
