package api

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestNoNulls: empty lists and maps of the wire types encode as [] and {}.
func TestNoNulls(t *testing.T) {
	for _, v := range []any{RunSummary{}, RunReport{}, ValidationReport{}, CacheListing{}, VerifyReport{}, CacheGCReport{},
		TransferReport{}, BuildReport{}, SandboxInfo{}, SpecView{}, Outcomes{}, DoctorReport{}, BenchReport{}, IntegrityCheckReport{}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "null") {
			t.Errorf("%T: %s", v, b)
		}
	}
	b, _ := json.Marshal(struct {
		L List[int]           `json:"l"`
		M Map[string, string] `json:"m"`
	}{L: []int{1}, M: map[string]string{"a": "b"}})
	if string(b) != `{"l":[1],"m":{"a":"b"}}` {
		t.Errorf("non-empty: %s", b)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"django__django-11099", "swesmith__x.abc123.func_pm__1", "gold", "org__model", ".hidden"} {
		if err := CheckName("id", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, "a\x00b", "a\nb", strings.Repeat("x", 256), "\xff"} {
		if err := CheckName("id", bad); !errors.Is(err, ErrBadName) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
