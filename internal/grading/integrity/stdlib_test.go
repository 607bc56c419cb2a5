package integrity

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStdlibList: the embedded list holds every module name of the host
// python3's sys.stdlib_module_names (else run go generate).
func TestStdlibList(t *testing.T) {
	out, err := exec.Command("python3", "-c", `import sys; print("\n".join(sorted(sys.stdlib_module_names)))`).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	for _, name := range strings.Fields(string(out)) {
		if !isStdlib(name) {
			t.Errorf("%s is in python3's sys.stdlib_module_names, not in stdlib.txt: run go generate ./internal/grading/integrity", name)
		}
	}
	for _, name := range []string{"unittest", "os", "string", "doctest"} {
		if !slices.Contains(strings.Fields(stdlibText), name) {
			t.Errorf("stdlib.txt lacks %s", name)
		}
	}
}
