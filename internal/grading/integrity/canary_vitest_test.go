package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/privtest"
)

// vitestModules is the node_modules of the pinned Vitest that make
// test-npm installs (testdata/vitest/package-lock.json).
const vitestModules = "testdata/vitest/node_modules"

// TestVitestCanary runs the JavaScript canary under the real Vitest
// (pinned, testdata/vitest) in an ESM package made here, tested as
// SWE-bench Multilingual's vuejs/core rows are (an npm script running
// vitest, a test file, --no-watch, the verbose reporter, -t), parses its
// output with that harness's Vitest parser and judges it: clean on an
// honest package, tampered where the code under test makes Vitest's
// toBe a no-op (every assertion passes). Nothing of the canary is left.
func TestVitestCanary(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		privtest.Skip(t, "node not found")
	}
	modules, err := filepath.Abs(vitestModules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, ".bin", "vitest")); err != nil {
		privtest.Skip(t, "no vitest in %s (make test-npm installs it): %v", vitestModules, err)
	}
	const noopToBe = "import { expect } from 'vitest';\n" +
		"Object.getPrototypeOf(expect(0)).toBe = function () { return this; };\n"
	for _, tc := range []struct {
		name, calc string
		reasons    int
	}{
		{name: "clean"},
		{name: "toBe no-op from the code under test", calc: noopToBe, reasons: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{
				"package.json":     `{"name": "calc", "version": "1.0.0", "private": true, "type": "module", "scripts": {"test": "vitest"}}` + "\n",
				"calc.js":          tc.calc + "export const add = (a, b) => a + b;\n",
				"test/add.test.js": "import { test, expect } from 'vitest';\nimport { add } from '../calc.js';\n\ntest('adds', () => { expect(add(2, 3)).toBe(5); });\n",
			})
			if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
				t.Fatal(err)
			}
			c := integrity.NewCanary("npm run test test/add.test.js --no-watch --reporter=verbose -t \"adds\"", []string{"test/add.test.js"})
			if !c.Active() {
				t.Fatalf("not active: %+v", c)
			}
			log, out := runCanary(t, c, dir, "CI=1", "NO_COLOR=1")
			if note := c.Skipped(out); note != "" {
				t.Fatalf("skipped: %s\n%s", note, log)
			}
			statuses := map[string]string{}
			for id, st := range grading.ParseVitest(out) {
				statuses[id] = string(st)
			}
			if got := c.Judge(statuses, true); len(got) != tc.reasons {
				t.Fatalf("reasons %q, want %d; statuses %v; log:\n%s", got, tc.reasons, statuses, log)
			}
			left, _ := filepath.Glob(filepath.Join(dir, "test", c.File+"*"))
			if len(left) > 0 {
				t.Errorf("canary file left: %v", left)
			}
		})
	}
}
