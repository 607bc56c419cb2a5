package wire

// CgroupFS is the sandbox's own cgroup as init mounts it, read-only, at
// /sys/fs/cgroup once it is in its cgroup namespace, so that the sandbox
// sees its group (its limits and usage) where a container's processes see
// theirs.
type CgroupFS struct {
	// V2: the cgroup2 filesystem at /sys/fs/cgroup itself.
	V2 bool `json:"v2,omitempty"`
	// Hierarchies (cgroup v1): one directory each of a read-only tmpfs at
	// /sys/fs/cgroup, the hierarchies the sandbox has a group in.
	Hierarchies []CgroupHierarchy `json:"hierarchies,omitempty"`
}

// CgroupHierarchy is a cgroup v1 hierarchy the sandbox has a group in.
type CgroupHierarchy struct {
	// Dir is its directory below /sys/fs/cgroup, named as on the host
	// ("memory", "cpu,cpuacct").
	Dir string `json:"dir"`
	// Options are the mount's data: the hierarchy's controllers
	// ("cpu,cpuacct").
	Options string `json:"options"`
	// Links are the names that are symlinks to Dir on the host ("cpu",
	// "cpuacct" for "cpu,cpuacct").
	Links []string `json:"links,omitempty"`
}

// Iface is the network interface besides loopback that init makes in a
// sandbox without a network (a tap device nothing reads from: no route
// leads out of it), so that test suites which look up the machine's
// address find one, as in a container.
type Iface struct {
	Name string `json:"name"` // "eth0"
	Addr string `json:"addr"` // with its prefix: "10.0.2.100/24"
}
