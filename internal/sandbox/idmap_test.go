package sandbox

import (
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestUnmappedUsernsLetsHolderGo: making the idmap user namespace does not
// wait for the holder to read its stdin: a holder that never does (yes(1)
// ignores its stdin and writes forever) is killed once its namespace is
// open, and the namespace stays usable for an idmapped mount.
func TestUnmappedUsernsLetsHolderGo(t *testing.T) {
	privtest.RequireRoot(t)
	yes := "/usr/bin/yes"
	if _, err := os.Stat(yes); err != nil {
		privtest.Skip(t, "no %s (coreutils)", yes)
	}
	ns, err := newUnmappedUserns(yes) // waiting for the holder, it never returned
	if err != nil {
		t.Fatalf("newUnmappedUserns: %v", err)
	}
	defer ns.Close()
	if err := checkIdmap(t.TempDir(), ns); err != nil {
		t.Errorf("idmapped mount through the namespace of a killed holder: %v", err)
	}
}
