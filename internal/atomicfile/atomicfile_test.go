package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// crashEnv makes the test binary a writer that dies in the middle of a
// write (see TestMain).
const crashEnv = "ATOMICFILE_TEST_CRASH_WRITING"

func TestMain(m *testing.M) {
	if p := os.Getenv(crashEnv); p != "" {
		WriteFrom(p, Options{}, func(f *os.File) error {
			f.Write([]byte("half of the new"))
			os.Exit(3) // no return, no cleanup: as a kill would
			return nil
		})
		os.Exit(4)
	}
	os.Exit(m.Run())
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		old      bool
		wantMode fs.FileMode
	}{
		{"new file, default mode", Options{}, false, 0o644},
		{"replaces a file", Options{}, true, 0o644},
		{"private mode", Options{Perm: 0o600}, true, 0o600},
		{"read-only mode", Options{Perm: 0o444}, false, 0o444},
		{"no sync", Options{NoSync: true}, true, 0o644},
		{"named temp", Options{TempPattern: ".tmp-f-*"}, true, 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			if tc.old {
				writeFile(t, p, "old")
			}
			if err := Write(p, []byte("new"), tc.opts); err != nil {
				t.Fatal(err)
			}
			checkFile(t, p, "new", tc.wantMode)
			checkOnly(t, dir, "f")
		})
	}
}

func TestWriteMakesTheDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "f")
	if err := Write(p, []byte("x"), Options{}); err == nil {
		t.Fatal("wrote into a missing directory without DirPerm")
	}
	if err := Write(p, []byte("x"), Options{DirPerm: 0o700}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "x", 0o644)
	st, err := os.Stat(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", st.Mode().Perm())
	}
}

func TestWriteThroughATempDir(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	os.Mkdir(tmp, 0o755)
	p := filepath.Join(root, "f")
	if err := Write(p, []byte("new"), Options{TempDir: tmp, TempPattern: "file-*"}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "new", 0o644)
	checkOnly(t, tmp)
}

func TestFailedFillKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeFile(t, p, "old")
	errFill := errors.New("the source broke")
	err := WriteFrom(p, Options{}, func(f *os.File) error {
		f.Write([]byte("part of the new"))
		return errFill
	})
	if !errors.Is(err, errFill) {
		t.Fatalf("got %v, want the fill's error", err)
	}
	checkFile(t, p, "old", 0o644)
	checkOnly(t, dir, "f")
}

func TestWriteFromByName(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	err := WriteFrom(p, Options{Perm: 0o640}, func(f *os.File) error {
		return os.WriteFile(f.Name(), []byte("by name"), 0o666)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "by name", 0o640)
}

func TestFailedRenameLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeFile(t, filepath.Join(p, "inside"), "a directory in the way")
	err := Write(p, []byte("new"), Options{})
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v, want an error naming %s", err, p)
	}
	checkOnly(t, dir, "f")
}

// TestTornWrite kills a writer in the middle of its write: the file is
// still the old one, whole, and what is left is a temp that is not it.
func TestTornWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeFile(t, p, "the old content")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+p)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the writer did not die in its write: %v: %s", err, out)
	}
	checkFile(t, p, "the old content", 0o644)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 || !strings.HasPrefix(ents[0].Name(), ".f.") {
		t.Fatalf("left %v, want f and one temp .f.*.tmp", names(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ents[0].Name())); string(b) != "half of the new" {
		t.Errorf("the temp holds %q", b)
	}
	// The next write is not disturbed by the leftover.
	if err := Write(p, []byte("the new content"), Options{}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "the new content", 0o644)
}

// TestConcurrentWriters: writers of one file at once never share a temp,
// so the file ends as one of their contents, whole.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte(fmt.Sprintf("%02d", i)), 64<<10)
			errs[i] = Write(p, data, Options{NoSync: i%2 == 0})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 128<<10 || !bytes.Equal(b, bytes.Repeat(b[:2], 64<<10)) {
		t.Errorf("the file is a mix of writes (%d bytes)", len(b))
	}
	checkOnly(t, dir, "f")
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Error(err)
	}
	if err := SyncDir(filepath.Join(dir, "gone")); err != nil {
		t.Errorf("a missing directory: %v, want nil", err)
	}
}

func writeFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func checkFile(t testing.TB, p, want string, mode fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s holds %q, want %q", p, b, want)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != mode {
		t.Errorf("%s has mode %v, want %v", p, st.Mode(), mode)
	}
}

// checkOnly fails unless dir holds exactly the names want (no temps).
func checkOnly(t testing.TB, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ents); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s holds %v, want %v", dir, got, want)
	}
}

func names(ents []os.DirEntry) []string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name())
	}
	return s
}
