// Package envcache turns dataset instances into ready-to-mount layers: it
// builds each environment once, exports each repository commit once, keeps
// both in a content-addressed store (package store) and hands a task the
// layer paths to give a sandbox, with no copy, extraction or network at task
// time.
//
// The nouns:
//
//   - Cache: a directory (relocatable) holding the store (store/), one bare
//     mirror per repository (mirrors/<owner>__<name>.git), lock files
//     (locks/), build logs (logs/), failure markers (failed/), scratch space
//     for builds (build/) and copy-mode task trees (tasks/).
//   - Base: what an environment is built on, the host's system directories
//     (read-only binds, no layer) or an imported root filesystem layer
//     (ref base/rootfs).
//   - Environment key: the SHA-256 over everything that determines an
//     environment (format version, base, interpreter path and version, the
//     build script with the spec's dependencies and the requirement file's
//     contents, the index date, the wheelhouse listing). Its layer is under
//     ref env/<key>.
//   - Environment layer: a virtualenv at VenvPath (fixed in every sandbox, so
//     it never needs relocation) with the spec's dependencies, committed from
//     the upper dir of a build sandbox over the base.
//   - Install layer: what one instance's pre-install and install steps wrote
//     (under /testbed and in the venv), built once per instance over the
//     base, the environment and the repository, under ref install/<key>;
//     stacked above the repository layer. Identical outputs are one layer.
//   - Toolchain: for a non-Python spec, a host toolchain directory (a
//     GOROOT, a Rust sysroot, a JDK) found by name, used where the base
//     shows it or bound read-only under ToolchainsDir; the toolchains'
//     versions make the environment key and their (empty) environment
//     layer holds the dependency dirs. The install layer's dependency step
//     fills DepsDir, which every sandbox of the instance sees at the same
//     paths; task and evaluation sandboxes get the tools' offline switches.
//   - Fetched toolchain: a toolchain of a version the spec names
//     (go@1.21.4, node@18, jre@11) that the host lacks, fetched once from
//     its registry, checked against the registry's checksum and kept as a
//     layer under ref toolchain/<name>@<version> (toolchain_fetch.go).
//   - Dependency store: what online dependency steps fetched with cargo
//     and Maven, kept in the download cache's deps/ for offline builds
//     (depstore.go).
//   - Registry proxy: what an online dependency step's npm, go, cargo
//     and mvn talk to, on 127.0.0.1 (package regproxy); it keeps their
//     packages in the download cache, which offline builds read without
//     it. A task sandbox given the host's network gets one too.
//   - Download cache: every file pip fetched for a build, by SHA-256, with
//     the index pages that listed them, read by pip as an index on disk
//     (offline builds, tasks) or through msb's proxy (the build network).
//   - Repository layer: /testbed at one commit with a small .git (a depth-1
//     fetch from the mirror, the upstream commit id), under ref
//     repo/<owner>/<name>@<commit>. An anchor holds the whole tree (loose
//     git objects); a delta, for a commit near an anchor, holds only what
//     differs from it (whiteouts for what is gone, its new trees and
//     commit as one pack) and names it as its parent, so it is mounted
//     above it. Unchanged files are shared between layers by the store,
//     and a delta has few directories of its own.
//   - Prepared: what one task needs: layer paths bottom first, the env vars
//     that activate the venv and point pip at the download cache, binds (an
//     interpreter outside the host dirs, the download cache), and a lease
//     that keeps the layers from GC until released.
//
// Builds of one key are serialized by flock files, so goroutines and
// processes sharing a cache build each layer once and the others wait and
// reuse it. A failed environment build leaves a marker and its log; later
// requests fail fast with ErrEnvBuildFailed until the marker is cleared
// (Options.RetryFailed). The on-disk layout is in docs/envcache.md.
package envcache
