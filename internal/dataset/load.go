package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/api"
)

// Format is a file format.
type Format string

// The file formats Load reads.
const (
	FormatJSON    Format = "json"    // one JSON array of rows
	FormatJSONL   Format = "jsonl"   // one JSON object a line
	FormatParquet Format = "parquet" // as published on dataset hubs
)

// ErrUnknownFormat is returned for a file whose format cannot be told.
var ErrUnknownFormat = errors.New("unknown dataset format")

// RowError says why one row was rejected.
type RowError struct {
	Row        int    // 1-based row number in the file
	InstanceID string // empty when the row has none
	Field      string // the offending field; empty for a row that is not an object
	Err        error
}

func (e RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "row %d", e.Row)
	if e.InstanceID != "" {
		fmt.Fprintf(&b, " (%s)", e.InstanceID)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e RowError) Unwrap() error { return e.Err }

// Sentinel errors inside RowError.
var (
	ErrMissingField = errors.New("missing")
	ErrWrongType    = errors.New("wrong type")
	ErrDuplicateID  = errors.New("duplicate instance_id")
)

// Options tune LoadFile.
type Options struct {
	Filter Filter
	// Source forces the dataset family; when empty it is read from a row's
	// "source" field, else SWE-smith when the row has "image_name" and no
	// "test_patch", else SWE-bench.
	Source Source
	// Format forces the file format; when empty it comes from the file name
	// (.json, .jsonl/.ndjson, .parquet) or, failing that, the first byte.
	Format Format
	// ImageTemplate names the image of each row that names none (see
	// ImageOf), e.g. "sweb.eval.x86_64.{instance_id_1776}".
	ImageTemplate string
}

// Load reads the instances of a dataset file that pass the filter. Rows that
// are not valid instances are returned as RowErrors and do not stop the
// others; err is for the file as a whole (unreadable, unknown format, bad
// filter, ids asked for that no row has).
func Load(path string, f Filter) ([]Instance, []RowError, error) {
	return LoadFile(path, Options{Filter: f})
}

// LoadFile is Load with options.
func LoadFile(path string, opt Options) ([]Instance, []RowError, error) {
	d, err := Read(path, opt)
	if err != nil {
		return nil, nil, err
	}
	return d.Selected, d.RowErrors, nil
}

// Dataset is a dataset file as read: every valid row, the rows the filter
// selects, and the rows that are not valid instances.
type Dataset struct {
	Path string
	// All holds every valid instance of the file, in file order.
	All []Instance
	// Selected holds the instances the filter keeps.
	Selected []Instance
	// RowErrors are the rows that are not valid instances, except rows
	// whose instance_id the filter excludes.
	RowErrors []RowError
}

// ErrUnknownID is returned for instance ids asked for (Filter.IDs) that no
// row of the file has.
var ErrUnknownID = errors.New("no such instance")

// Read reads a dataset file. Besides Load's errors, it fails with
// ErrUnknownID naming every id of Filter.IDs that no row has.
func Read(path string, opt Options) (*Dataset, error) {
	m, err := opt.Filter.compile()
	if err != nil {
		return nil, err
	}
	if opt.ImageTemplate != "" {
		if err := CheckImageTemplate(opt.ImageTemplate); err != nil {
			return nil, err
		}
	}
	rows, rowErrs, err := readRows(path, opt.Format)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Path: path, RowErrors: rowErrs}
	var kept []Instance
	seen := map[string]int{}
	named := map[string]bool{} // ids of every row, valid or not
	for i, row := range rows {
		n := i + 1
		if row.err != nil {
			d.RowErrors = append(d.RowErrors, RowError{Row: n, Err: row.err})
			continue
		}
		in, errs := decode(row.fields, opt.Source)
		errs = append(errs, applyImageTemplate(&in, opt.ImageTemplate)...)
		named[in.InstanceID] = true
		if in.InstanceID != "" && !m.keep(in.InstanceID) {
			if len(errs) == 0 && seen[in.InstanceID] == 0 {
				seen[in.InstanceID] = n
				d.All = append(d.All, in)
			}
			continue
		}
		if len(errs) > 0 {
			for _, e := range errs {
				e.Row = n
				d.RowErrors = append(d.RowErrors, e)
			}
			continue
		}
		if first, dup := seen[in.InstanceID]; dup {
			d.RowErrors = append(d.RowErrors, RowError{Row: n, InstanceID: in.InstanceID, Field: "instance_id",
				Err: fmt.Errorf("%w (first at row %d)", ErrDuplicateID, first)})
			continue
		}
		seen[in.InstanceID] = n
		d.All = append(d.All, in)
		kept = append(kept, in)
	}
	var unknown []string
	for _, id := range opt.Filter.IDs {
		if !named[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w in %s: %s", ErrUnknownID, path, strings.Join(unknown, ", "))
	}
	sortRowErrors(d.RowErrors)
	d.Selected = m.slice(kept)
	return d, nil
}

func sortRowErrors(errs []RowError) {
	// Stable insertion sort by row: file-level parse errors and field errors interleave.
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Row < errs[j-1].Row; j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// rawRow is one row before checking: its fields, or why it could not be read.
type rawRow struct {
	fields map[string]any
	err    error
}

func detectFormat(path string, head []byte) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return FormatJSON, nil
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".parquet":
		return FormatParquet, nil
	}
	switch t := bytes.TrimLeft(head, " \t\r\n\ufeff"); {
	case bytes.HasPrefix(head, []byte("PAR1")):
		return FormatParquet, nil
	case bytes.HasPrefix(t, []byte("[")):
		return FormatJSON, nil
	case bytes.HasPrefix(t, []byte("{")):
		return FormatJSONL, nil
	}
	return "", fmt.Errorf("%w: %s (use .json, .jsonl or .parquet)", ErrUnknownFormat, path)
}

func readRows(path string, format Format) ([]rawRow, []RowError, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening dataset: %w", err)
	}
	defer f.Close()
	if format == "" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		if format, err = detectFormat(path, head[:n]); err != nil {
			return nil, nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, nil, fmt.Errorf("reading dataset %s: %w", path, err)
		}
	}
	switch format {
	case FormatJSON:
		rows, err := readJSONArray(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading JSON dataset %s: %w", path, err)
		}
		return rows, nil, nil
	case FormatJSONL:
		rows, err := readJSONL(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading JSONL dataset %s: %w", path, err)
		}
		return rows, nil, nil
	case FormatParquet:
		st, err := f.Stat()
		if err != nil {
			return nil, nil, fmt.Errorf("reading Parquet dataset %s: %w", path, err)
		}
		rows, err := readParquet(f, st.Size())
		if err != nil {
			return nil, nil, fmt.Errorf("reading Parquet dataset %s: %w", path, err)
		}
		return rows, nil, nil
	}
	return nil, nil, fmt.Errorf("%w %q", ErrUnknownFormat, format)
}

func readJSONArray(r io.Reader) ([]rawRow, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("expected a JSON array of rows, found %v", tok)
	}
	var rows []rawRow
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return rows, fmt.Errorf("row %d: %w", len(rows)+1, err)
		}
		rows = append(rows, objectRow(raw))
	}
	return rows, nil
}

func readJSONL(r io.Reader) ([]rawRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var rows []rawRow
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rows = append(rows, objectRow(line))
	}
	return rows, sc.Err()
}

func objectRow(raw []byte) rawRow {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return rawRow{err: fmt.Errorf("not a JSON object: %w", err)}
	}
	if fields == nil {
		return rawRow{err: errors.New("not a JSON object: null")}
	}
	return rawRow{fields: fields}
}

// requiredFields lists, per source, the fields a row must have.
var requiredFields = map[Source][]string{
	SWEBench: {"instance_id", "repo", "base_commit", "patch", "test_patch", "version", "FAIL_TO_PASS", "PASS_TO_PASS"},
	SWEGym:   {"instance_id", "repo", "base_commit", "patch", "test_patch", "version", "FAIL_TO_PASS", "PASS_TO_PASS"},
	SWESmith: {"instance_id", "repo", "patch", "image_name", "FAIL_TO_PASS", "PASS_TO_PASS"},
	Custom:   {"instance_id", "repo", "base_commit", "FAIL_TO_PASS", "PASS_TO_PASS"},
}

// decode checks one row and converts it.
func decode(row map[string]any, force Source) (Instance, []RowError) {
	if force == MultiSWEBench || force == "" && isMultiSWERow(row) {
		return decodeMultiSWE(row)
	}
	var in Instance
	var errs []RowError
	bad := func(field string, err error) {
		errs = append(errs, RowError{InstanceID: in.InstanceID, Field: field, Err: err})
	}
	str := func(field string, dst *string) {
		v, ok := row[field]
		if !ok || v == nil {
			return
		}
		switch v := v.(type) {
		case string:
			*dst = v
		case json.Number: // "version": 3.0 written as a number
			if field == "version" {
				*dst = v.String()
				return
			}
			bad(field, fmt.Errorf("%w: want a string, got the number %s", ErrWrongType, v))
		default:
			bad(field, fmt.Errorf("%w: want a string, got %s", ErrWrongType, typeName(v)))
		}
	}
	str("instance_id", &in.InstanceID)
	str("repo", &in.Repo)
	str("base_commit", &in.BaseCommit)
	str("patch", &in.Patch)
	str("test_patch", &in.TestPatch)
	str("problem_statement", &in.ProblemStatement)
	str("hints_text", &in.HintsText)
	str("version", &in.Version)
	str("environment_setup_commit", &in.EnvironmentSetupCommit)
	str("created_at", &in.CreatedAt)
	str("image_name", &in.ImageName)
	str("docker_image", &in.Image)
	str("repo_url", &in.RepoURL)
	var src string
	str("source", &src)
	in.FailToPass = testList(row, "FAIL_TO_PASS", bad)
	in.PassToPass = testList(row, "PASS_TO_PASS", bad)

	switch {
	case force != "":
		in.Source = force
	case src != "":
		in.Source = Source(src)
	case in.ImageName != "" && in.TestPatch == "": // SWE-rebench's rows have image_name too, and a test_patch
		in.Source = SWESmith
	default:
		in.Source = SWEBench
	}
	if in.Image == "" && in.Source != SWESmith {
		in.Image = in.ImageName // SWE-rebench: the instance's own image
	}
	req, known := requiredFields[in.Source]
	if !known {
		bad("source", fmt.Errorf("unknown source %q (want swe-bench, swe-gym, swe-smith, multi-swe-bench or custom)", in.Source))
		req = requiredFields[Custom]
	}
	for _, f := range req {
		if v, ok := row[f]; !ok || v == nil || v == "" && f != "patch" && f != "test_patch" {
			bad(f, ErrMissingField)
		}
	}
	if in.InstanceID != "" {
		// The id names the instance's directory of results.
		if err := api.CheckName("instance_id", in.InstanceID); err != nil {
			bad("instance_id", err)
		}
	}
	if in.Source == SWESmith && in.BaseCommit == "" {
		// SWE-smith mirrors are named "swesmith/<owner>__<name>.<commit>".
		if i := strings.LastIndexByte(in.Repo, '.'); i > 0 {
			in.BaseCommit = in.Repo[i+1:]
		}
	}
	for i := range errs {
		errs[i].InstanceID = in.InstanceID
	}
	return in, errs
}

// testList reads FAIL_TO_PASS or PASS_TO_PASS: a list of strings, or a
// string holding a JSON list of strings.
func testList(row map[string]any, field string, bad func(string, error)) []string {
	v, ok := row[field]
	if !ok || v == nil {
		return nil
	}
	var items []any
	switch v := v.(type) {
	case []any:
		items = v
	case []string:
		return v
	case string:
		if strings.TrimSpace(v) == "" {
			return []string{}
		}
		if err := json.Unmarshal([]byte(v), &items); err != nil {
			bad(field, fmt.Errorf("%w: the string is not a JSON list: %v", ErrWrongType, err))
			return nil
		}
	default:
		bad(field, fmt.Errorf("%w: want a list of strings or a JSON string of one, got %s", ErrWrongType, typeName(v)))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			bad(field, fmt.Errorf("%w: item %d is %s, want a string", ErrWrongType, i, typeName(it)))
			return nil
		}
		out = append(out, s)
	}
	return out
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64, int64, int32, int:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Filter selects instances. Zero value: keep all.
type Filter struct {
	IDs   []string // keep only these instance ids (any order)
	Regex string   // keep ids matching this regular expression (RE2, unanchored)
	Slice string   // "start:end", Python-style, over the instances the other filters keep
}

type matcher struct {
	ids        map[string]bool
	re         *regexp.Regexp
	start, end *int
}

// ErrBadFilter is returned for a filter that cannot be used.
var ErrBadFilter = errors.New("bad filter")

func (f Filter) compile() (matcher, error) {
	var m matcher
	if len(f.IDs) > 0 {
		m.ids = make(map[string]bool, len(f.IDs))
		for _, id := range f.IDs {
			m.ids[id] = true
		}
	}
	if f.Regex != "" {
		re, err := regexp.Compile(f.Regex)
		if err != nil {
			return m, fmt.Errorf("%w: regex %q: %v", ErrBadFilter, f.Regex, err)
		}
		m.re = re
	}
	if f.Slice != "" {
		a, b, found := strings.Cut(f.Slice, ":")
		if !found {
			return m, fmt.Errorf("%w: slice %q: want start:end", ErrBadFilter, f.Slice)
		}
		for _, p := range []struct {
			s   string
			dst **int
		}{{a, &m.start}, {b, &m.end}} {
			if strings.TrimSpace(p.s) == "" {
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(p.s))
			if err != nil {
				return m, fmt.Errorf("%w: slice %q: %v", ErrBadFilter, f.Slice, err)
			}
			*p.dst = &n
		}
	}
	return m, nil
}

func (m matcher) keep(id string) bool {
	if m.ids != nil && !m.ids[id] {
		return false
	}
	return m.re == nil || m.re.MatchString(id)
}

// slice applies start:end as Python does (negative counts from the end,
// out-of-range bounds are clamped).
func (m matcher) slice(in []Instance) []Instance {
	n := len(in)
	clamp := func(p *int, def int) int {
		if p == nil {
			return def
		}
		i := *p
		if i < 0 {
			i += n
		}
		return max(0, min(i, n))
	}
	s, e := clamp(m.start, 0), clamp(m.end, n)
	if s >= e {
		return nil
	}
	return in[s:e]
}
