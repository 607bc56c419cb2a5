package store

import (
	"encoding/binary"
	"os"
	"slices"
	"testing"
)

// TestNormalizeCapability: a revision 3 capability whose rootid is this
// process's uid reads as the revision 2 value its namespace's root sees;
// another rootid, revision 2 and malformed values are left as they are.
func TestNormalizeCapability(t *testing.T) {
	v2 := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	v3 := func(rootid uint32) []byte {
		v := append(slices.Clone(v2), 0, 0, 0, 0)
		v[3] = 3
		binary.LittleEndian.PutUint32(v[20:], rootid)
		return v
	}
	mine := v3(uint32(os.Geteuid()))
	other := v3(uint32(os.Geteuid()) + 1)
	for _, c := range []struct{ in, want []byte }{
		{mine, v2}, {other, other}, {v2, v2}, {mine[:23], mine[:23]}, {nil, nil},
	} {
		if got := normalizeCapability(c.in); !slices.Equal(got, c.want) {
			t.Errorf("normalizeCapability(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}
