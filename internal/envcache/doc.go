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
//     environment (format version, base, interpreter path and version,
//     repository, spec version, install fields of the spec, environment-setup
//     commit, wheelhouse listing, --system-site-packages). Its layer is under
//     ref env/<key>.
//   - Environment layer: a virtualenv at VenvPath (fixed in every sandbox, so
//     it never needs relocation) plus whatever the install steps changed
//     outside /testbed, committed from the upper dir of a build sandbox.
//   - Repository layer: /testbed at one commit with a small .git (a depth-1
//     fetch from the mirror, loose objects, the upstream commit id), under
//     ref repo/<owner>/<name>@<commit>. Unchanged files and git objects are
//     shared between commits by the store.
//   - Prepared: what one task needs: layer paths bottom first, the env vars
//     that activate the venv, binds (an interpreter outside the host dirs),
//     and a lease that keeps the layers from GC until released.
//
// Builds of one key are serialized by flock files, so goroutines and
// processes sharing a cache build each layer once and the others wait and
// reuse it. A failed environment build leaves a marker and its log; later
// requests fail fast with ErrEnvBuildFailed until the marker is cleared
// (Options.RetryFailed). The on-disk layout is in docs/envcache.md.
package envcache
