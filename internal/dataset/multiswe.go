package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/api"
)

// MultiSWEBench is the source of Multi-SWE-bench rows (and of its training
// split Multi-SWE-RL, which has the same shape). A row names its
// repository by "org" and "repo", its pull request by "number", its base
// commit by "base.sha", carries the gold patch as "fix_patch", and instead
// of FAIL_TO_PASS/PASS_TO_PASS four maps of test transitions (p2p, f2p,
// s2p, n2p) and the statuses the benchmark recorded in its three runs.
const MultiSWEBench Source = "multi-swe-bench"

// MultiSWE is what a Multi-SWE-bench row holds beyond the Instance fields
// it fills in (Repo, BaseCommit, Patch, TestPatch, FailToPass, PassToPass).
type MultiSWE struct {
	Org    string `json:"org"`
	Name   string `json:"repo"` // the repository's name, without the org
	Number int64  `json:"number"`

	// The tests the harness's report sorted by transition from the test
	// run to the fix run: PASS→PASS, FAIL→PASS, SKIP→PASS, NONE→PASS.
	P2P map[string]Transition `json:"p2p_tests"`
	F2P map[string]Transition `json:"f2p_tests"`
	S2P map[string]Transition `json:"s2p_tests"`
	N2P map[string]Transition `json:"n2p_tests"`

	// The benchmark's recorded runs, nil when the row has none: on the base
	// commit, with the test patch, with test and fix patches.
	Run       *RunResult `json:"run_result,omitempty"`
	TestPatch *RunResult `json:"test_patch_result,omitempty"`
	FixPatch  *RunResult `json:"fix_patch_result,omitempty"`
}

// Transition is one test's status in the three runs: PASS, FAIL, SKIP or
// NONE (not in that run's log).
type Transition struct {
	Run  string `json:"run"`
	Test string `json:"test"`
	Fix  string `json:"fix"`
}

// RunResult is one run's recorded test names by status. A name is in at
// most one list, as the harness's TestResult requires.
type RunResult struct {
	Passed  []string `json:"passed_tests"`
	Failed  []string `json:"failed_tests"`
	Skipped []string `json:"skipped_tests"`
}

// isMultiSWERow tells a Multi-SWE-bench row by the fields no other source has.
func isMultiSWERow(row map[string]any) bool {
	_, org := row["org"]
	_, fix := row["fix_patch"]
	return org && fix
}

// multiSWERequired are the fields a Multi-SWE-bench row must have.
var multiSWERequired = []string{"org", "repo", "number", "base", "fix_patch", "test_patch",
	"p2p_tests", "f2p_tests", "s2p_tests", "n2p_tests"}

// transitionStatuses are the statuses a Transition may hold.
var transitionStatuses = map[string]bool{"PASS": true, "FAIL": true, "SKIP": true, "NONE": true}

// decodeMultiSWE checks one Multi-SWE-bench row and converts it. Its
// FAIL_TO_PASS are the f2p, s2p and n2p tests (each must pass after the
// fix and did not before) and its PASS_TO_PASS the p2p tests, so that the
// rest of msb sees an ordinary instance; Instance.MultiSWE keeps the rest.
func decodeMultiSWE(row map[string]any) (Instance, []RowError) {
	in := Instance{Source: MultiSWEBench}
	m := &MultiSWE{}
	var errs []RowError
	bad := func(field string, err error) {
		errs = append(errs, RowError{Field: field, Err: err})
	}
	for _, f := range multiSWERequired {
		if v, ok := row[f]; !ok || v == nil || v == "" && f != "fix_patch" && f != "test_patch" {
			bad(f, ErrMissingField)
		}
	}
	m.Org = rowString(row, "org", bad)
	m.Name = rowString(row, "repo", bad)
	m.Number = rowNumber(row, "number", bad)
	in.Patch = rowString(row, "fix_patch", bad)
	in.TestPatch = rowString(row, "test_patch", bad)
	in.BaseCommit = baseSHA(row, bad)
	in.ProblemStatement = problemStatement(row)
	in.Repo = m.Org + "/" + m.Name
	in.InstanceID = rowString(row, "instance_id", bad)
	if in.InstanceID == "" && m.Org != "" && m.Name != "" {
		in.InstanceID = fmt.Sprintf("%s__%s-%d", m.Org, m.Name, m.Number)
	}
	m.P2P = transitions(row, "p2p_tests", bad)
	m.F2P = transitions(row, "f2p_tests", bad)
	m.S2P = transitions(row, "s2p_tests", bad)
	m.N2P = transitions(row, "n2p_tests", bad)
	m.Run = runResult(row, "run_result", bad)
	m.TestPatch = runResult(row, "test_patch_result", bad)
	m.FixPatch = runResult(row, "fix_patch_result", bad)
	if in.InstanceID != "" {
		if err := api.CheckName("instance_id", in.InstanceID); err != nil {
			bad("instance_id", err)
		}
	}
	in.FailToPass = sortedKeys(m.F2P, m.S2P, m.N2P)
	in.PassToPass = sortedKeys(m.P2P)
	in.MultiSWE = m
	for i := range errs {
		errs[i].InstanceID = in.InstanceID
	}
	return in, errs
}

// rowString reads an optional string field.
func rowString(row map[string]any, field string, bad func(string, error)) string {
	v, ok := row[field]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		bad(field, fmt.Errorf("%w: want a string, got %s", ErrWrongType, typeName(v)))
	}
	return s
}

// rowNumber reads an integer field.
func rowNumber(row map[string]any, field string, bad func(string, error)) int64 {
	v, ok := row[field]
	if !ok || v == nil {
		return 0
	}
	var n int64
	var err error
	switch v := v.(type) {
	case json.Number:
		n, err = v.Int64()
	case int64:
		n = v
	case int32:
		n = int64(v)
	default:
		err = fmt.Errorf("want an integer, got %s", typeName(v))
	}
	if err != nil {
		bad(field, fmt.Errorf("%w: %v", ErrWrongType, err))
	}
	return n
}

// baseSHA reads base.sha, the commit the pull request was opened against.
func baseSHA(row map[string]any, bad func(string, error)) string {
	v, ok := row["base"]
	if !ok || v == nil {
		return ""
	}
	base, ok := v.(map[string]any)
	if !ok {
		bad("base", fmt.Errorf("%w: want an object, got %s", ErrWrongType, typeName(v)))
		return ""
	}
	sha := rowString(base, "sha", func(_ string, err error) { bad("base.sha", err) })
	if sha == "" {
		bad("base.sha", ErrMissingField)
	}
	return sha
}

// problemStatement is what the agent is asked: the resolved issues' titles
// and bodies (the benchmark's prompt), else the pull request's own.
func problemStatement(row map[string]any) string {
	var parts []string
	add := func(obj map[string]any) {
		for _, f := range []string{"title", "body"} {
			if s, ok := obj[f].(string); ok && strings.TrimSpace(s) != "" {
				parts = append(parts, s)
			}
		}
	}
	if issues, ok := row["resolved_issues"].([]any); ok {
		for _, it := range issues {
			if obj, ok := it.(map[string]any); ok {
				add(obj)
			}
		}
	}
	if len(parts) == 0 {
		add(row)
	}
	return strings.Join(parts, "\n\n")
}

// transitions reads one of the p2p/f2p/s2p/n2p maps.
func transitions(row map[string]any, field string, bad func(string, error)) map[string]Transition {
	v, ok := row[field]
	if !ok || v == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		bad(field, fmt.Errorf("%w: want an object of tests, got %s", ErrWrongType, typeName(v)))
		return nil
	}
	out := make(map[string]Transition, len(obj))
	for name, tv := range obj {
		t, err := transition(tv)
		if err != nil {
			bad(field, fmt.Errorf("test %q: %w", name, err))
			return nil
		}
		out[name] = t
	}
	return out
}

func transition(v any) (Transition, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Transition{}, fmt.Errorf("%w: want an object {run, test, fix}, got %s", ErrWrongType, typeName(v))
	}
	var t Transition
	for _, f := range []struct {
		name string
		dst  *string
	}{{"run", &t.Run}, {"test", &t.Test}, {"fix", &t.Fix}} {
		s, ok := obj[f.name].(string)
		if !ok || !transitionStatuses[s] {
			return Transition{}, fmt.Errorf("%w: %s is %v, want PASS, FAIL, SKIP or NONE", ErrWrongType, f.name, obj[f.name])
		}
		*f.dst = s
	}
	return t, nil
}

// runResult reads one recorded run and checks the harness's invariants:
// each count equals its list's length and no name has two statuses.
func runResult(row map[string]any, field string, bad func(string, error)) *RunResult {
	v, ok := row[field]
	if !ok || v == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		bad(field, fmt.Errorf("%w: want an object, got %s", ErrWrongType, typeName(v)))
		return nil
	}
	r := &RunResult{}
	seen := map[string]string{}
	for _, kind := range []struct {
		name string
		dst  *[]string
	}{{"passed", &r.Passed}, {"failed", &r.Failed}, {"skipped", &r.Skipped}} {
		sub := func(f string, err error) { bad(field+"."+f, err) }
		list := testList(obj, kind.name+"_tests", sub)
		if count, ok := obj[kind.name+"_count"]; ok && count != nil {
			if n := rowNumber(obj, kind.name+"_count", sub); n != int64(len(list)) {
				sub(kind.name+"_count", fmt.Errorf("%w: %d, but %s_tests has %d names", ErrBadResult, n, kind.name, len(list)))
			}
		}
		for _, name := range list {
			if other, dup := seen[name]; dup {
				sub(kind.name+"_tests", fmt.Errorf("%w: %q is both %s and %s", ErrBadResult, name, other, kind.name))
				return nil
			}
			seen[name] = kind.name
		}
		*kind.dst = list
	}
	return r
}

// ErrBadResult: a recorded run contradicts itself (a count that is not its
// list's length, a test with two statuses).
var ErrBadResult = errors.New("inconsistent run result")

// sortedKeys lists the names of the given maps, sorted.
func sortedKeys(ms ...map[string]Transition) []string {
	out := []string{}
	for _, m := range ms {
		for k := range m {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
