package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheCompactSummary: msb cache compact says how many layers it made
// cold and objects it compressed, and how many it kept raw (a file of one
// block or none gains nothing compressed) or skipped.
func TestCacheCompactSummary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"big.py": strings.Repeat("def f(x):\n    return x + 1\n", 4000), // 108 KB, compressible
		"tiny":   "one block, compressed or not",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := filepath.Join(dir, "cache")
	msb(t, dir, nil, "cache", "import-rootfs", "--cache", cache, src).expect(t, "import-rootfs", 0, nil, nil)
	msb(t, dir, nil, "cache", "compact", "--all", "--cache", cache).expect(t, "compact", 0,
		[]string{"compacted 1 layers (0 left: in use); compressed 1 objects", "(1 kept raw: no block to gain; 0 skipped: linked elsewhere)"}, nil)
}
