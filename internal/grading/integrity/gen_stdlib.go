//go:build ignore

// gen_stdlib writes stdlib.txt: Python's sys.stdlib_module_names of the
// python3 on PATH, one per line, sorted. Run by go generate.
package main

import (
	"log"
	"os"
	"os/exec"
)

func main() {
	out, err := exec.Command("python3", "-c", `import sys; print("\n".join(sorted(sys.stdlib_module_names)))`).Output()
	if err != nil {
		log.Fatalf("asking python3 for sys.stdlib_module_names: %v", err)
	}
	if err := os.WriteFile("stdlib.txt", out, 0o644); err != nil {
		log.Fatal(err)
	}
}
