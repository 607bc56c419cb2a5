package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// validator reads fields of a SWE-ReX request body with pydantic's (v2,
// lax mode) coercions, collecting its errors in its shape: loc is
// ["body", <union tag>, field, ...].
type validator struct {
	body map[string]any
	loc  []any
	errs []rexValidationError
	req  string // the next field read is required
}

func newValidator(body map[string]any, tag string) *validator {
	v := &validator{body: body, loc: []any{"body"}}
	if tag != "" {
		v.loc = append(v.loc, tag)
	}
	return v
}

func (v *validator) required(field string) *validator {
	v.req = field
	return v
}

func (v *validator) fail(typ, msg string, input any, loc ...any) {
	v.errs = append(v.errs, rexValidationError{Type: typ, Loc: v.at(loc...), Msg: msg, Input: input})
}

// at is the loc of a field (and its parts) of the body read.
func (v *validator) at(loc ...any) rexLoc {
	return append(append(rexLoc{}, v.loc...), loc...)
}

// get returns a field's value; absent is reported as missing when the
// field was marked required.
func (v *validator) get(field string) (any, bool) {
	req := v.req == field
	v.req = ""
	x, ok := v.body[field]
	if !ok && req {
		v.fail("missing", "Field required", v.body, field)
	}
	return x, ok
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &validationError{v.errs}
}

// tag checks a single-tag discriminator (session_type: bash).
func (v *validator) tag(field, want string) error {
	x, ok := v.body[field]
	if !ok {
		return tagNotFound(v.body, field)
	}
	if x != want {
		return tagInvalid(v.body, field, x, want)
	}
	v.loc = append(v.loc, want)
	return nil
}

// tagNotFound refuses a body without its discriminator field.
func tagNotFound(body map[string]any, field string) error {
	return &validationError{[]rexValidationError{{Type: "union_tag_not_found", Loc: rexLoc{"body"},
		Msg: fmt.Sprintf("Unable to extract tag using discriminator '%s'", field), Input: body, Ctx: map[string]any{"discriminator": "'" + field + "'"}}}}
}

// tagInvalid refuses a body whose discriminator field is none of want.
func tagInvalid(body map[string]any, field string, tag any, want ...string) error {
	t := fmt.Sprint(tag)
	quoted := make([]string, len(want))
	for i, w := range want {
		quoted[i] = "'" + w + "'"
	}
	expected := strings.Join(quoted, ", ")
	return &validationError{[]rexValidationError{{Type: "union_tag_invalid", Loc: rexLoc{"body"},
		Msg:   fmt.Sprintf("Input tag '%s' found using '%s' does not match any of the expected tags: %s", t, field, expected),
		Input: body, Ctx: map[string]any{"discriminator": "'" + field + "'", "tag": t, "expected_tags": expected}}}}
}

func (v *validator) str(field, def string) string {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	s, isStr := x.(string)
	if !isStr {
		v.fail("string_type", "Input should be a valid string", x, field)
	}
	return s
}

func (v *validator) optStr(field string) *string {
	x, ok := v.get(field)
	if !ok || x == nil {
		return nil
	}
	s, isStr := x.(string)
	if !isStr {
		v.fail("string_type", "Input should be a valid string", x, field)
		return nil
	}
	return &s
}

func (v *validator) bool(field string, def bool) bool {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	switch b := x.(type) {
	case bool:
		return b
	case string:
		if r, ok := pyBool(b); ok {
			return r
		}
		v.fail("bool_parsing", "Input should be a valid boolean, unable to interpret input", x, field)
	case json.Number:
		if b == "0" || b == "1" {
			return b == "1"
		}
		v.fail("bool_parsing", "Input should be a valid boolean, unable to interpret input", x, field)
	default:
		v.fail("bool_type", "Input should be a valid boolean", x, field)
	}
	return false
}

func (v *validator) number(field string, x any) (float64, bool) {
	switch n := x.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err != nil {
			v.fail("float_parsing", "Input should be a valid number, unable to parse string as a number", x, field)
			return 0, false
		}
		return f, true
	case bool:
		if n {
			return 1, true
		}
		return 0, true
	}
	v.fail("float_type", "Input should be a valid number", x, field)
	return 0, false
}

func (v *validator) float(field string, def float64) float64 {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	f, _ := v.number(field, x)
	return f
}

func (v *validator) optFloat(field string) *float64 {
	x, ok := v.get(field)
	if !ok || x == nil {
		return nil
	}
	f, ok := v.number(field, x)
	if !ok {
		return nil
	}
	return &f
}

func (v *validator) int(field string, def int) int {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	switch n := x.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i)
		}
		f, err := n.Float64()
		if err == nil && f == math.Trunc(f) {
			return int(f)
		}
		v.fail("int_from_float", "Input should be a valid integer, got a number with a fractional part", x, field)
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			v.fail("int_parsing", "Input should be a valid integer, unable to parse string as an integer", x, field)
		}
		return i
	default:
		v.fail("int_type", "Input should be a valid integer", x, field)
	}
	return 0
}

func (v *validator) strList(field string, def []string) []string {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	l, isList := x.([]any)
	if !isList {
		v.fail("list_type", "Input should be a valid list", x, field)
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			v.fail("string_type", "Input should be a valid string", e, field, i)
		}
		out = append(out, s)
	}
	return out
}

func (v *validator) literal(field, def string, allowed ...string) string {
	x, ok := v.get(field)
	if !ok {
		return def
	}
	s, _ := x.(string)
	for _, a := range allowed {
		if s == a && x != nil {
			return s
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = "'" + a + "'"
	}
	want := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	v.errs = append(v.errs, rexValidationError{Type: "literal_error", Loc: v.at(field), Msg: "Input should be " + want,
		Input: x, Ctx: map[string]any{"expected": want}})
	return def
}

// strOrList reads a str | list[str] field.
func (v *validator) strOrList(field string) (list []string, s string, isList bool) {
	x, ok := v.get(field)
	if !ok {
		return nil, "", false
	}
	switch t := x.(type) {
	case string:
		return nil, t, false
	case []any:
		var bad []rexValidationError
		for i, e := range t {
			es, ok := e.(string)
			if !ok {
				bad = append(bad, rexValidationError{Type: "string_type", Loc: v.at(field, "list[str]", i),
					Msg: "Input should be a valid string", Input: e})
			}
			list = append(list, es)
		}
		if len(bad) > 0 {
			v.fail("string_type", "Input should be a valid string", x, field, "str")
			v.errs = append(v.errs, bad...)
		}
		return list, strings.Join(list, " "), true
	}
	v.fail("string_type", "Input should be a valid string", x, field, "str")
	v.fail("list_type", "Input should be a valid list", x, field, "list[str]")
	return nil, "", false
}

// optStrMap reads a dict[str, str] | None field.
func (v *validator) optStrMap(field string) (map[string]string, bool) {
	x, ok := v.get(field)
	if !ok || x == nil {
		return nil, false
	}
	m, isMap := x.(map[string]any)
	if !isMap {
		v.fail("dict_type", "Input should be a valid dictionary", x, field)
		return nil, false
	}
	out := map[string]string{}
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			v.fail("string_type", "Input should be a valid string", e, field, k)
		}
		out[k] = s
	}
	return out, true
}
