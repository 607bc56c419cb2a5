package grading

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .json files from the parsers' output")

// goldenParsers says which parsers read the logs of each testdata folder.
// The logs are real output of the real tools, made by testdata/regen.sh
// from the suites under testdata/fixtures. The first parser's map of
// x.log is x.json, another's x.<parser>.json.
var goldenParsers = map[string][]string{
	"pytest":         {ParserPytest, ParserPytestVerbose},
	"pytest_options": {ParserPytestOptions},
	"astropy":        {ParserPytestV2},
	"sphinx":         {ParserPytestV2},
	"seaborn":        {ParserSeaborn},
	"matplotlib":     {ParserMatplotlib},
	"django":         {ParserDjango},
	"sympy":          {ParserSympy},
	"unittest":       {ParserUnittest},
}

func TestGoldenLogs(t *testing.T) {
	for dir, names := range goldenParsers {
		logs, err := filepath.Glob(filepath.Join("testdata", dir, "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) == 0 {
			t.Errorf("no logs in testdata/%s", dir)
		}
		for i, name := range names {
			parse, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			ext := ".json"
			if i > 0 {
				ext = "." + name + ".json"
			}
			for _, logPath := range logs {
				t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(logPath), ".log")+"/"+name, func(t *testing.T) {
					checkGolden(t, logPath, strings.TrimSuffix(logPath, ".log")+ext, parse)
				})
			}
		}
	}
}

func checkGolden(t *testing.T, logPath, goldenPath string, parse ParseFunc) {
	t.Helper()
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(parse(string(log)), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenLogs -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: parser output differs from %s\n got: %s\nwant: %s", logPath, goldenPath, got, want)
	}
}
