package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestSpecShowLanguage: msb spec show prints a non-Python spec's language,
// toolchains and eval_env, and a Python spec's JSON has none of the keys.
func TestSpecShowLanguage(t *testing.T) {
	dir := t.TempDir()
	rows := `{"instance_id":"crate-1","repo":"me/crate","base_commit":"abc","patch":"","test_patch":"","problem_statement":"x","version":"1","FAIL_TO_PASS":["a"],"PASS_TO_PASS":[]}
{"instance_id":"py-1","repo":"me/py","base_commit":"abc","patch":"","test_patch":"","problem_statement":"x","version":"1","FAIL_TO_PASS":["a"],"PASS_TO_PASS":[]}
`
	specs := `version: 1
repos:
  me/crate:
    "*":
      language: rust
      toolchains: [rust]
      install: cargo fetch
      test_cmd: cargo test
      log_parser: multiswe/cargo
      directives: none
      eval_env: {CARGO_NET_OFFLINE: "true"}
  me/py:
    "*":
      python: "3.11"
      test_cmd: python -m unittest -v
      log_parser: unittest
      directives: none
`
	for name, content := range map[string]string{"rows.jsonl": rows, "specs.yaml": specs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	show := func(id string) (api.SpecView, string) {
		t.Helper()
		r := msb(t, dir, nil, "--json", "spec", "show", id, "--dataset", "rows.jsonl", "--spec", "specs.yaml")
		if r.code != 0 {
			t.Fatalf("spec show %s: exit %d: %s", id, r.code, r.stderr)
		}
		var v api.SpecView
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		return v, r.stdout
	}
	v, _ := show("crate-1")
	if v.Language != "rust" || !slices.Equal(v.Toolchains, []string{"rust"}) || v.EvalEnv["CARGO_NET_OFFLINE"] != "true" || v.Python != "" {
		t.Errorf("rust spec shown as %+v", v)
	}
	if _, out := show("py-1"); strings.Contains(out, `"language"`) || strings.Contains(out, `"toolchains"`) || strings.Contains(out, `"eval_env"`) {
		t.Errorf("python spec shows language keys: %s", out)
	}
}
