package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Digest is the SHA-256 of some bytes: an object's content or a manifest's
// canonical encoding. Its text form is "sha256:" followed by 64 lowercase hex
// digits.
type Digest [sha256.Size]byte

const digestPrefix = "sha256:"

// DigestOf returns the digest of b.
func DigestOf(b []byte) Digest { return sha256.Sum256(b) }

// ParseDigest parses the text form "sha256:<64 hex>".
func ParseDigest(s string) (Digest, error) {
	hexPart, ok := strings.CutPrefix(s, digestPrefix)
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q lacks the %q prefix", ErrBadDigest, s, digestPrefix)
	}
	return parseHexDigest(hexPart)
}

func parseHexDigest(h string) (Digest, error) {
	var d Digest
	if len(h) != 2*len(d) {
		return d, fmt.Errorf("%w: %q is not %d hex digits", ErrBadDigest, h, 2*len(d))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return d, fmt.Errorf("%w: %q is not lowercase hex", ErrBadDigest, h)
		}
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, fmt.Errorf("%w: %v", ErrBadDigest, err)
	}
	return d, nil
}

// Hex returns the 64 hex digits, without the algorithm prefix.
func (d Digest) Hex() string { return hex.EncodeToString(d[:]) }

// String returns "sha256:<hex>".
func (d Digest) String() string { return digestPrefix + d.Hex() }

// IsZero reports whether d is the zero value (no digest).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// LayerID names a layer: the digest of its canonical manifest.
type LayerID Digest

// ParseLayerID parses the text form of a layer digest.
func ParseLayerID(s string) (LayerID, error) {
	d, err := ParseDigest(s)
	return LayerID(d), err
}

// Digest returns id as a plain Digest.
func (id LayerID) Digest() Digest { return Digest(id) }

// Hex returns the 64 hex digits of the layer digest.
func (id LayerID) Hex() string { return Digest(id).Hex() }

// String returns "sha256:<hex>".
func (id LayerID) String() string { return Digest(id).String() }

// Short returns the first 12 hex digits, for messages.
func (id LayerID) Short() string { return Digest(id).Hex()[:12] }

// MarshalText implements encoding.TextMarshaler.
func (id LayerID) MarshalText() ([]byte, error) { return Digest(id).MarshalText() }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *LayerID) UnmarshalText(b []byte) error { return (*Digest)(id).UnmarshalText(b) }
