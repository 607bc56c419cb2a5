package sandbox

import "testing"

// TestDiskDirFromEnv: without RuntimeOptions.DiskDir the disk pool lives
// under $MSB_DISK_DIR (how make test keeps its pool to itself), else
// under /var/tmp.
func TestDiskDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ env, want string }{{dir, dir + "/msb-pool"}, {"", "/var/tmp/msb-pool"}} {
		t.Setenv(DiskDirEnv, tc.env)
		rt, err := NewRuntime(RuntimeOptions{StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.poolDir(); got != tc.want {
			t.Errorf("%s=%q: pool dir %s, want %s", DiskDirEnv, tc.env, got, tc.want)
		}
		rt.Close()
	}
}
