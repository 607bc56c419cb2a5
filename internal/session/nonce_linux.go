package session

import (
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// newNonce returns a fresh random nonce, nonceLen hex digits of the
// kernel's random bytes (getrandom(2), as crypto/rand reads them). Not
// crypto/rand itself: it links the FIPS module into msb-sandbox, whose
// package inits every sandbox's start then paid for (docs/bench.md,
// session 18). Like crypto/rand's Read, it does not fail: getrandom of so
// few bytes blocks only until the kernel's pool is seeded, at boot.
func newNonce() string {
	var b [nonceLen / 2]byte
	for n := 0; n < len(b); {
		k, err := unix.Getrandom(b[n:], 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			panic(fmt.Sprintf("session: getrandom: %v", err))
		}
		n += k
	}
	return hex.EncodeToString(b[:])
}
