// Package pool bounds the disk space of root-mode sandboxes.
//
// A Pool is a btrfs filesystem made for one msb process: a sparse backing
// file, unlinked as soon as a loop device holds it, attached with
// autoclear, and mounted only as a detached mount (fsmount) that this
// process holds by descriptor. Nothing of it appears in any mount table of
// the host, and when the process exits (or is killed) the descriptors close,
// the sandboxes' own mounts of it die with their mount namespaces, the loop
// device detaches itself and the backing file's space is freed: a pool
// cannot outlive its process.
//
// A Volume is one btrfs subvolume of the pool, made for one sandbox, whose
// quota group limits what the sandbox can write into it (btrfs answers
// EDQUOT, "Disk quota exceeded", past the limit). A sandbox's init mounts
// its volume (the pool's device with subvol=<name>) inside the sandbox's
// mount namespace and puts the overlay's upper and work dirs in it.
//
// The pool's size bounds what all its volumes hold together; the pool
// itself takes only the space its contents use on the host (mounted with
// discard, so freed blocks are punched out of the backing file again).
package pool
