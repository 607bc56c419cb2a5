package multiswe

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParsers gives untrusted logs to every parser: none may panic, a
// parse is deterministic, and an accepted result names each test once.
// The seed corpus (real logs and the generated tests' fragments) runs in
// every go test.
func FuzzParsers(f *testing.F) {
	logs, _ := filepath.Glob(filepath.Join("testdata", "*", "*.log"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, pool := range fragments {
		for _, line := range pool {
			f.Add(line + "\n")
		}
	}
	f.Add("Running\n\r\nTests run: 1, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 1 sec")
	f.Add("✓ before any suite")
	f.Fuzz(func(t *testing.T, log string) {
		for name, p := range frameworks {
			r, err := Parse(p, log)
			if err != nil {
				if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNoSuite) {
					t.Fatalf("%s: unexpected error %v", name, err)
				}
				continue
			}
			if len(r.Statuses()) != r.Count() {
				t.Fatalf("%s: accepted a result naming a test twice: %+v", name, r)
			}
			again, _ := Parse(p, log)
			if !reflect.DeepEqual(r, again) {
				t.Fatalf("%s: two parses differ", name)
			}
		}
	})
}
