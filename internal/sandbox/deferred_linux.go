package sandbox

// mountPaths are the paths d's layers are mounted from: d.Mount when
// given, else d.Layers. A layer being published is complete before it is
// in its place (a fork's snapshot: the engine's early tree), and is then
// mounted from where it is now (a descriptor's path, /proc/<pid>/fd/N,
// which follows it when it is renamed) while the sandbox's Config names
// its place.
func (d Deferred) mountPaths() []string {
	if len(d.Mount) == len(d.Layers) && d.Mount != nil {
		return d.Mount
	}
	return d.Layers
}
