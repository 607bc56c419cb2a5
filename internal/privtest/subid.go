package privtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// subIDStart is the first id of the subordinate range SubIDs gives User
// when it has none: far above the ranges useradd hands out from 100000.
const subIDStart = 1 << 30

// SubIDs gives User, as root, a subordinate uid and gid range of 65536 ids
// in /etc/subuid and /etc/subgid when it has none (useradd gives one to a
// new user only where those files existed), which newuidmap and newgidmap
// need for rootless sandboxes that run as a user other than root; ranges
// it added are removed after the test. Unprivileged calls it; not root,
// it does nothing (the rerun's parent did it).
func SubIDs(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u := ensureUser(t)
	ids := fmt.Sprintf("%d-%d", subIDStart, subIDStart+65535)
	for _, f := range []struct{ file, add, del string }{
		{"/etc/subuid", "--add-subuids", "--del-subuids"},
		{"/etc/subgid", "--add-subgids", "--del-subgids"},
	} {
		if hasSubIDs(f.file, u.Username, u.Uid) {
			continue
		}
		if out, err := exec.Command("usermod", f.add, ids, User).CombinedOutput(); err != nil {
			t.Fatalf("usermod %s %s %s: %v: %s", f.add, ids, User, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("usermod", f.del, ids, User).CombinedOutput(); err != nil {
				t.Errorf("usermod %s %s %s: %v: %s", f.del, ids, User, err, out)
			}
		})
	}
}

// hasSubIDs reports whether file has a range for the user name or uid.
func hasSubIDs(file, name, uid string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		owner, _, _ := strings.Cut(sc.Text(), ":")
		if owner == name || owner == uid {
			return true
		}
	}
	return false
}
