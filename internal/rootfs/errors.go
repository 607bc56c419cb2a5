package rootfs

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrImage: an image could not be imported or used because of what it
	// is or where it was looked for (missing, malformed, wrong digest,
	// truncated, hostile, unreachable registry). Every import failure that
	// is the input's fault wraps it, with one of the more precise errors
	// below where one applies.
	ErrImage = errors.New("bad image")
	// ErrNoImage: the store or the source holds no such image.
	ErrNoImage error = &imageError{"no such image"}
	// ErrHostileLayer: a layer tries to place files outside its root
	// (absolute or ".." paths) or to write through a symlink.
	ErrHostileLayer error = &imageError{"hostile layer"}
	// ErrUnsupported: a media type, transport or entry type msb does not read.
	ErrUnsupported error = &imageError{"unsupported"}
	// ErrAuth: a registry refused the credentials (401 or 403), or there
	// were none where it wants some, or the auth file could not be read.
	ErrAuth error = &imageError{"registry authentication failed"}
	// ErrNoLocalStore: no podman or docker on this host to read images from.
	ErrNoLocalStore error = &imageError{"no local image store"}
)

// imageError is a precise kind of ErrImage: errors.Is(err, ErrImage) holds
// for it too.
type imageError struct{ msg string }

func (e *imageError) Error() string        { return e.msg }
func (e *imageError) Is(target error) bool { return target == ErrImage }
