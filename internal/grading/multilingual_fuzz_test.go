package grading

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzMultilingualParsers gives any text to every SWE-bench Multilingual
// port: none may panic, and no test name may span lines.
func FuzzMultilingualParsers(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "multilingual", "*.log"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range append(append(doctestLogs, multimodalLogs...), "", "\r", "[ok]: a in b", "  ✔ x\nStarting browser\n  a\n ✔ b\n\tc\nSUMMARY:",
		"+ mvn -Dtest=A\nBUILD SUCCESS\nBUILD FAILURE", "A > b\nPASSED", "x: E", "Suite (A)\n✔ t") {
		f.Add(s)
	}
	names := MultilingualParserNames()
	f.Fuzz(func(t *testing.T, log string) {
		for _, p := range names {
			for name := range multilingualParsers[p](log) {
				if strings.ContainsAny(name, "\r\n") && p != "doctest" {
					t.Fatalf("%s: name %q spans lines", p, name)
				}
			}
		}
	})
}
