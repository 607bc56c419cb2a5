package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// leanInit are msb's packages that the full msb (msb-full: serve, eval,
// cache, ...) links but a given command need not use: their package-level
// regular expressions, metric descriptions and tables are made on first
// use, so their init allocates (almost) nothing. Before they were made lazy
// each allocated 120 KiB to 650 KiB at every start of msb. (The lean msb,
// which msb run executes, links none of them but api: deps_test.go.)
var leanInit = []string{
	"github.com/minisandbox/msb/internal/api",
	"github.com/minisandbox/msb/internal/envcache",
	"github.com/minisandbox/msb/internal/rootfs",
	"github.com/minisandbox/msb/internal/server",
	"github.com/minisandbox/msb/internal/grading",
	"github.com/minisandbox/msb/internal/grading/integrity",
	"github.com/minisandbox/msb/internal/grading/multiswe",
	"github.com/minisandbox/msb/internal/spec",
}

// leanInitBytes bounds what one of leanInit's inits may allocate: room for
// a few small maps, not for a compiled regular expression table.
const leanInitBytes = 32 << 10

// TestRunInitIsLean: starting the full msb (package inits run before any
// command) does not build what only other commands use. It reads
// the Go runtime's own account of each package's init (GODEBUG=inittrace=1),
// in bytes allocated, not time.
func TestRunInitIsLean(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the msb binary")
	}
	bin := filepath.Join(t.TempDir(), "msb")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "--help")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("msb run --help: %v\n%s", err, stderr.String())
	}
	inits := initBytes(t, stderr.String())
	for _, pkg := range leanInit {
		b, ok := inits[pkg]
		switch {
		case !ok:
			t.Errorf("no init of %s in msb's init trace: is it still linked? (update leanInit)", pkg)
		case b > leanInitBytes:
			t.Errorf("init of %s allocates %d bytes (at most %d): make its package-level work lazy (sync.OnceValue)", pkg, b, leanInitBytes)
		}
	}
}

// initBytes reads GODEBUG=inittrace=1's lines
// "init PKG @T ms, C ms clock, B bytes, A allocs" into PKG -> B.
func initBytes(t testing.TB, trace string) map[string]int {
	t.Helper()
	m := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(trace))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		b, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("init trace line %q: %v", sc.Text(), err)
		}
		m[f[1]] += b
	}
	if len(m) == 0 {
		t.Fatalf("no init trace in msb's stderr:\n%s", trace)
	}
	return m
}
