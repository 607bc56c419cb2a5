// Package store is MiniSandbox's content-addressed store: the on-disk cache
// that environment and repository layers live in, built once and mounted by
// every sandbox as overlay lower dirs without copying.
//
// The nouns:
//
//   - Object: a file's content, named by its SHA-256 digest and stored once
//     however many layers hold it (objects/sha256/ab/abcd...).
//   - Inode: a file in the inode pool (inodes/ab/<digest>-<mode>-<uid>-<gid>),
//     standing for content plus the metadata that hard links share. Every
//     layer file with that content and metadata is a hard link to it, so
//     identical files across all layers are one inode on disk. An object is
//     usually itself a link to its first inode, so content is not stored
//     twice.
//   - Manifest: a layer's list of entries (path, type, mode, owner, link
//     target, object digest, size, and for layers committed from an overlay
//     upper dir, deletions and opaque directories; extended attributes
//     (Xattr: file capabilities, trusted.* and user.*) for image layers), in
//     one canonical JSON encoding.
//   - Layer: a manifest plus its materialized tree (layers/<digest>/tree), a
//     read-only directory that is used directly as an overlay lower dir. A
//     layer's ID is the digest of its canonical manifest; it names its parents
//     (the layers it was built on), so a layer and its parents form an overlay
//     stack (Store.Stack). Deletions are materialized as overlay whiteouts and
//     opaque directories carry the overlay.opaque xattr, so stacking gives the
//     view the layer was committed from.
//   - Ref: a name (env/<key>, repo/<name>@<commit>, install/<key>,
//     commit/<name>@<commit>) pointing at a layer,
//     replaced atomically. Refs are the roots GC keeps.
//   - Staged layer: a commit's first half (StageDir, StageTree, StageFiles):
//     its source read and hashed, its new content in temp files, nothing
//     visible. Publish makes one or more of them visible in one commit's
//     barriers (a snapshot's data layer and its record above it).
//   - Cold layer: a layer Compact removed the tree of (it stays in the
//     store: Has, Compacted), its objects that no materialized layer links
//     kept zstd-compressed (objects/zstd/ab/<hex>.zst) until its next
//     Materialize or Lease thaws and checks them and builds the tree again.
//   - Lease: a running sandbox's claim on the layers it mounts, a file held
//     under flock; when its holder dies the kernel releases it and GC may
//     collect what only it kept.
//
// Every write is atomic: content goes to a temp file inside the store, is
// synced, verified against its size and digest and then renamed or linked
// into place, so a crash or a full disk leaves nothing half-visible. Writers
// share a store-wide flock that GC takes exclusively.
//
// The store holds no absolute paths and can be moved. It works for root and
// for unprivileged users: a rootless store records owners in manifests but
// materializes every file as owned by the caller (inside a user namespace
// that maps the caller to root, files then appear owned by root).
//
// The on-disk format is described, with its version, in docs/store-format.md.
package store
