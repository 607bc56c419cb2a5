//go:build !msblean

package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// TestIntegrityFlag: msb eval and validate grade with --integrity warn
// unless told fail, the mode reaches the engine's config, and another
// value is a usage error.
func TestIntegrityFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want api.IntegrityMode
	}{
		{nil, api.IntegrityWarn},
		{[]string{"--integrity", "fail"}, api.IntegrityFail},
		{[]string{"--integrity", "warn"}, api.IntegrityWarn},
	} {
		cfg, err := engineConfigOf(t, "", tc.args...)
		if err != nil || cfg.Integrity != tc.want {
			t.Errorf("%q: integrity %q, %v; want %q", tc.args, cfg.Integrity, err, tc.want)
		}
	}
	if _, err := engineConfigOf(t, "", "--integrity", "off"); !errors.Is(err, errUsage) {
		t.Errorf("--integrity off: %v, want a usage error", err)
	}
}

// TestCanaryFlag: msb eval and validate run the canary in a fork of the
// harness's sandbox unless --canary says separate, inline or off, the
// mode reaches the engine's config, and another value is a usage error.
func TestCanaryFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want api.CanaryMode
	}{
		{nil, api.CanaryForked},
		{[]string{"--canary", "separate"}, api.CanarySeparate},
		{[]string{"--canary", "inline"}, api.CanaryInline},
		{[]string{"--canary", "off"}, api.CanaryOff},
	} {
		cfg, err := engineConfigOf(t, "", tc.args...)
		if err != nil || cfg.Canary != tc.want {
			t.Errorf("%q: canary %q, %v; want %q", tc.args, cfg.Canary, err, tc.want)
		}
	}
	for _, bad := range []string{"", "beside"} {
		if _, err := engineConfigOf(t, "", "--canary", bad); !errors.Is(err, errUsage) {
			t.Errorf("--canary %q: %v, want a usage error", bad, err)
		}
	}
}

// TestDetailOfTampered: under --integrity warn a tampered patch keeps its
// verdict, and the eval table's detail says it was flagged, and why.
func TestDetailOfTampered(t *testing.T) {
	warned := api.EvalResult{Outcome: api.OutcomeResolved, Report: api.InstanceReport{Integrity: api.IntegrityTampered,
		IntegrityReasons: []string{"conftest.py: changes conftest.py"}}}
	if got, want := detailOf(warned), "integrity: tampered (warn): conftest.py: changes conftest.py"; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}
	ok := api.EvalResult{Outcome: api.OutcomeResolved, Report: api.InstanceReport{Integrity: api.IntegrityOK}}
	if got := detailOf(ok); got != "" {
		t.Errorf("detail %q for an ok patch", got)
	}
	failed := api.EvalResult{Outcome: api.OutcomeUnresolved, Detail: "integrity: tampered: x\nmore", Report: warned.Report}
	if got := detailOf(failed); got != "integrity: tampered: x ..." {
		t.Errorf("detail %q", got)
	}
}

// TestRepeatFlag: --repeat takes 1 to engine.MaxRepeat, and a flaky
// result says so in the eval table.
func TestRepeatFlag(t *testing.T) {
	for n, ok := range map[int]bool{0: false, 1: true, engine.MaxRepeat: true, engine.MaxRepeat + 1: false} {
		if err := checkRepeatFlag(n); (err == nil) != ok || err != nil && !errors.Is(err, errUsage) {
			t.Errorf("--repeat %d: %v", n, err)
		}
	}
	for _, args := range [][]string{{"eval", "--predictions", "gold", "--run-id", "r"}, {"validate"}} {
		args = append(args, "--dataset", "missing.jsonl", "--repeat", "0")
		if r := msb(t, t.TempDir(), nil, args...); r.code != exitUsage || !strings.Contains(r.stderr, "--repeat 0") {
			t.Errorf("msb %q: exit %d %s, want a usage error", args, r.code, r.stderr)
		}
	}
	flaky := api.EvalResult{Outcome: api.OutcomeResolved, Flaky: true, Runs: 3, Report: api.InstanceReport{FlakyTests: []string{"a", "b"}}}
	if got, want := detailOf(flaky), "flaky: 2 tests flipped in 3 runs"; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}
}
