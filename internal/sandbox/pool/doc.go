// Package pool bounds the disk space of root-mode sandboxes.
//
// A Pool is a btrfs filesystem made once for a host (or for each pool
// directory) and kept: a sparse image file, attached to a loop device with
// autoclear and mounted at the pool directory's mnt, with quota groups on.
// The first process that opens the pool makes it (mkfs) or, after a reboot,
// mounts it again; every later process only opens the mounted directory,
// so a sandbox's disk costs a subvolume and a quota limit (well under a
// millisecond), not a filesystem. The pool's size bounds what all its
// volumes hold together; the image takes on the host only what they use
// (mounted with discard, freed blocks are punched out of it again).
//
// The pool directory holds:
//
//	lock           taken (flock) while the pool is made or mounted, or a
//	               user namespace bound
//	image          the backing file
//	mnt/           the mounted filesystem: a subvolume per volume, and .owners/
//	userns-<name>  a user namespace bound on the file, kept for every
//	               process of the host (Userns; msb's idmap namespace)
//
// A Volume is one btrfs subvolume of the pool, made for one sandbox, whose
// quota group limits what the sandbox can write into it (btrfs answers
// EDQUOT, "Disk quota exceeded", past the limit). A sandbox's init mounts
// its volume (the pool's device with subvol=<name>) inside the sandbox's
// mount namespace and puts the overlay's upper and work dirs in it.
//
// An owner is the process that made a volume: it holds an exclusive flock
// on the volume's owner file, .owners/<name>, from before the subvolume is
// made until after it is deleted. A process that dies (even by SIGKILL)
// lets go of its locks, so a volume whose owner file is not locked is an
// orphan, and Reclaim deletes it; one whose owner lives is never touched.
package pool
