package store

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrNotFound: no such object, layer, ref or lease.
	ErrNotFound = errors.New("not found")
	// ErrBadDigest: a string is not a well-formed digest.
	ErrBadDigest = errors.New("malformed digest")
	// ErrDigestMismatch: bytes did not hash to the digest they were stored or sent under.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrSizeMismatch: a file or stream did not have the size it was announced with.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrBadManifest: a manifest is malformed, not canonical, or inconsistent.
	ErrBadManifest = errors.New("invalid manifest")
	// ErrBadRef: a ref name is not allowed.
	ErrBadRef = errors.New("invalid ref name")
	// ErrVersion: the store or an archive has a format version this code does not read.
	ErrVersion = errors.New("unsupported format version")
	// ErrUnsupportedOverlay: an overlay upper dir uses a feature a commit cannot represent
	// (redirect_dir or metacopy); mount the build overlay without them.
	ErrUnsupportedOverlay = errors.New("unsupported overlayfs feature in upper dir")
	// ErrBadArchive: an export stream is malformed.
	ErrBadArchive = errors.New("invalid archive")
)
