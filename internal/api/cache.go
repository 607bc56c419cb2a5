package api

// CacheLayer is one layer of the environment cache (msb cache ls).
type CacheLayer struct {
	ID      string       `json:"id"`   // sha256:<hex>
	Kind    string       `json:"kind"` // env, repo, install, base, or "" for a layer without a ref
	Refs    List[string] `json:"refs"`
	Parents List[string] `json:"parents"`
	Entries int          `json:"entries"`
	// FileBytes is the sum of the layer's file sizes: what it holds.
	FileBytes int64 `json:"file_bytes"`
	// DiskBytes is the disk space (st_blocks) of the layer's files.
	DiskBytes int64 `json:"disk_bytes"`
	// UniqueBytes is the part of DiskBytes no other layer shares: what
	// removing this layer alone frees, at least. Never more than DiskBytes.
	UniqueBytes int64  `json:"unique_bytes"`
	LastUse     string `json:"last_use"` // RFC 3339
}

// BuildFailure is a recorded failed build of an environment or of an
// instance's install layer.
type BuildFailure struct {
	Kind   string `json:"kind"` // "env" or "install"
	Key    string `json:"key"`
	EnvKey string `json:"env_key"`
	Reason string `json:"reason"`
	Log    string `json:"log"`
	At     string `json:"at"`
}

// CacheListing is msb cache ls.
type CacheListing struct {
	Dir      string             `json:"dir"`
	Layers   List[CacheLayer]   `json:"layers"`
	Failures List[BuildFailure] `json:"failures"`
}

// CacheUsage is msb cache du.
type CacheUsage struct {
	Dir     string `json:"dir"`
	Layers  int    `json:"layers"`
	Objects int    `json:"objects"`
	Inodes  int    `json:"inodes"`
	// FileBytes: the layers' files as separate copies would take (sum of
	// the layers' disk bytes).
	FileBytes int64 `json:"file_bytes"`
	// TreeBytes: what the layers' files take on disk, each shared file
	// once.
	TreeBytes int64 `json:"tree_bytes"`
	// DiskBytes: everything under the cache's store (the shared files,
	// the layers' directories, manifests), each inode once.
	DiskBytes int64 `json:"disk_bytes"`
	// DedupRatio is FileBytes / TreeBytes: how much sharing files between
	// layers saves (1 when nothing is shared; 0 for an empty cache).
	DedupRatio float64 `json:"dedup_ratio"`
	// Shifted is the number of shifted layers (rootless sandboxes' copies
	// of the files an image's user owns, owned by subordinate ids), and
	// ShiftedBytes what they take on disk: a part of DiskBytes, none of
	// FileBytes or TreeBytes. Where the copies are clones (btrfs, XFS)
	// they share blocks with the layers' files that st_blocks counts.
	Shifted      int   `json:"shifted"`
	ShiftedBytes int64 `json:"shifted_bytes"`
	// Compression is how the filesystem compresses what the store writes:
	// "zstd (btrfs property)", "zstd:1 (btrfs mount)", or empty for none.
	// The byte counts come from st_blocks, which btrfs gives before
	// compression; with it on, the disk holds less than they say.
	Compression string `json:"compression,omitempty"`
	// Compacted is the number of cold layers (msb cache compact): their
	// trees removed until their next use; Compressed the number of
	// objects held only zstd-compressed, and CompressedBytes their disk
	// space, a part of DiskBytes.
	Compacted       int   `json:"compacted"`
	Compressed      int   `json:"compressed"`
	CompressedBytes int64 `json:"compressed_bytes"`
}

// CacheCompactReport is msb cache compact.
type CacheCompactReport struct {
	Layers List[string] `json:"layers"` // layers made cold
	Leased int          `json:"leased"` // layers left as they are: a running sandbox holds them
	// Objects were compressed: RawBytes on disk before, CompressedBytes
	// after; Skipped ones are linked from outside the store and stay.
	Objects         int   `json:"objects"`
	RawBytes        int64 `json:"raw_bytes"`
	CompressedBytes int64 `json:"compressed_bytes"`
	Skipped         int   `json:"skipped"`
	// KeptRaw objects stay raw: compressed they would take as many whole
	// blocks (most files of a block or two).
	KeptRaw    int   `json:"kept_raw"`
	FreedBytes int64 `json:"freed_bytes"` // trees included
}

// BuildStatus is how one instance's layers came to be.
type BuildStatus string

// Build statuses.
const (
	BuildBuilt       BuildStatus = "built"
	BuildReused      BuildStatus = "reused"
	BuildFailed      BuildStatus = "failed"
	BuildInterrupted BuildStatus = "interrupted"
)

// BuildPhases are the timings of msb cache build's phases.
type BuildPhases struct {
	Mirror   int64 `json:"mirror_ns"`
	Checkout int64 `json:"checkout_ns"`
	EnvBuild int64 `json:"env_build_ns"`
	// Install: the instance's install steps, run into its install layer.
	Install int64 `json:"install_ns"`
	Commit  int64 `json:"commit_ns"`
	Copy    int64 `json:"copy_ns"`
}

// BuildResult is one instance's line of msb cache build.
type BuildResult struct {
	InstanceID string      `json:"instance_id"`
	Status     BuildStatus `json:"status"`
	EnvKey     string      `json:"env_key,omitempty"`
	// InstallKey keys the instance's install layer ("" when its spec has
	// no install steps).
	InstallKey string      `json:"install_key,omitempty"`
	Error      string      `json:"error,omitempty"`
	Log        string      `json:"log,omitempty"`
	Timings    BuildPhases `json:"timings"`
}

// BuildReport is msb cache build.
type BuildReport struct {
	Built         int               `json:"built"`
	Reused        int               `json:"reused"`
	Failed        int               `json:"failed"`
	Interrupted   int               `json:"interrupted"`
	EnvBuilds     int64             `json:"env_builds"`
	InstallBuilds int64             `json:"install_builds"`
	RepoBuilds    int64             `json:"repo_builds"`
	SkippedRows   int               `json:"skipped_rows"`
	Instances     List[BuildResult] `json:"instances"`
}

// VerifyProblem is one thing wrong in the cache.
type VerifyProblem struct {
	Kind   string       `json:"kind"`
	Path   string       `json:"path"`
	Digest string       `json:"digest,omitempty"`
	Layers List[string] `json:"layers"`
	Detail string       `json:"detail"`
}

// VerifyReport is msb cache verify.
type VerifyReport struct {
	Dir         string              `json:"dir"`
	Objects     int                 `json:"objects"`
	Inodes      int                 `json:"inodes"`
	Layers      int                 `json:"layers"`
	BytesHashed int64               `json:"bytes_hashed"`
	Problems    List[VerifyProblem] `json:"problems"`
	OK          bool                `json:"ok"`
}

// CacheGCReport is msb cache gc.
type CacheGCReport struct {
	Layers       List[string] `json:"layers"`
	Inodes       int          `json:"inodes"`
	Objects      int          `json:"objects"`
	Leases       int          `json:"leases"`
	Temp         int          `json:"temp"`
	Shifted      int          `json:"shifted"`       // shifted layers removed (their layers were)
	ShiftedBytes int64        `json:"shifted_bytes"` // the part of FreedBytes they held
	FreedBytes   int64        `json:"freed_bytes"`
	Kept         int          `json:"kept"`
	DanglingRefs List[string] `json:"dangling_refs"`
}

// TransferReport is msb cache export, import and pull: which layers and
// refs went, and the objects and bytes moved.
type TransferReport struct {
	File    string       `json:"file,omitempty"`
	URL     string       `json:"url,omitempty"`
	Layers  List[string] `json:"layers"`
	Refs    List[string] `json:"refs"`
	Objects int          `json:"objects"`
	Bytes   int64        `json:"bytes"`
	// ArchiveBytes is the size of the archive written or read.
	ArchiveBytes int64 `json:"archive_bytes,omitempty"`
}

// LayerRef is a layer and the ref naming it (msb cache import-rootfs).
type LayerRef struct {
	Layer string `json:"layer"`
	Ref   string `json:"ref"`
}

// SpecView is msb spec show: the resolved spec of an instance, as data.
type SpecView struct {
	InstanceID        string              `json:"instance_id"`
	Repo              string              `json:"repo"`
	Version           string              `json:"version"`
	Language          string              `json:"language,omitempty"`
	Toolchains        List[string]        `json:"toolchains,omitempty"`
	Python            string              `json:"python"`
	Bootstrap         List[string]        `json:"bootstrap"`
	Packages          string              `json:"packages,omitempty"`
	PackagesPip       List[string]        `json:"packages_pip"`
	IndexDate         string              `json:"index_date,omitempty"`
	RequirementsPaths List[string]        `json:"requirements_paths"`
	EnvYMLPaths       List[string]        `json:"env_yml_paths"`
	PipPackages       List[string]        `json:"pip_packages"`
	SystemPackages    List[string]        `json:"system_packages"`
	PreInstall        List[string]        `json:"pre_install"`
	Install           string              `json:"install"`
	EvalCommands      List[string]        `json:"eval_commands"`
	EvalInstall       bool                `json:"eval_install"`
	TestCmd           string              `json:"test_cmd"`
	Directives        string              `json:"directives"`
	LogParser         string              `json:"log_parser"`
	Env               Map[string, string] `json:"env"`
	EvalEnv           Map[string, string] `json:"eval_env,omitempty"`
	Source            List[string]        `json:"source"`
	TestCommand       string              `json:"test_command"`
	TestFiles         List[string]        `json:"test_files"`
	EnvironmentCommit string              `json:"environment_commit"`
	Digest            string              `json:"spec_digest"`
}
