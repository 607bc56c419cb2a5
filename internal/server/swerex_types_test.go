package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// swerexModels is what testdata/swerex_models.py writes: the models of
// the installed swe-rex package, per route.
type swerexModels struct {
	Routes map[string]struct {
		Method   string
		Requests []pyModel
		Response pyModel
	}
	Errors map[string]jsonSchema
}

type pyModel struct {
	Name   string
	Schema jsonSchema
	Order  []string // a request's fields in the model's order
}

type jsonSchema struct {
	Properties map[string]map[string]any
	Required   []string
}

// TestSwerexModels: every SWE-ReX route reads and answers the models of
// the real swe-rex package (internal/server/testdata/requirements.txt):
// the routes are swerex-remote's; each request type has the model's
// fields in its order, with its JSON types, required fields and
// defaults, reporting bad fields in pydantic's order; each response and
// error type has the model's fields and JSON types, and writes every field
// the model always writes.
func TestSwerexModels(t *testing.T) {
	want := loadSwerexModels(t)
	table := map[string]rexRoute{}
	for _, rt := range (&Server{}).rexRouteTable() {
		table[rt.path] = rt
	}
	for path := range table {
		if _, ok := want.Routes[path]; !ok {
			t.Errorf("msb serves %s, swerex-remote does not", path)
		}
	}
	for path, w := range want.Routes {
		t.Run(path, func(t *testing.T) {
			rt, ok := table[path]
			if !ok {
				t.Fatalf("swerex-remote serves %s %s, msb does not", w.Method, path)
			}
			if rt.method != w.Method {
				t.Errorf("method %s, SWE-ReX's %s", rt.method, w.Method)
			}
			if len(rt.req) != len(w.Requests) {
				t.Fatalf("%d request types, SWE-ReX reads %d models", len(rt.req), len(w.Requests))
			}
			for i, m := range w.Requests {
				checkRexRequest(t, m, rt.req[i])
			}
			checkRexResponse(t, w.Response.Name, w.Response.Schema, rt.resp)
		})
	}
	for name, zero := range map[string]any{"_ExceptionTransfer": rexExceptionTransfer{}, "ValidationError": rexValidationError{}} {
		s, ok := want.Errors[name]
		if !ok {
			t.Fatalf("swe-rex has no %s", name)
		}
		checkRexResponse(t, name, s, zero)
	}
}

func loadSwerexModels(t *testing.T) swerexModels {
	t.Helper()
	py := python(t)
	out := filepath.Join(t.TempDir(), "models.json")
	runPython(t, py, time.Minute, filepath.Join("testdata", "swerex_models.py"), out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m swerexModels
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Routes) == 0 {
		t.Fatalf("no routes in %s", b)
	}
	return m
}

// goField is a struct field as encoding/json writes it.
type goField struct {
	name, typ string
	omitempty bool
}

func goFields(t reflect.Type) []goField {
	var out []goField
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, goField{name: name, typ: goJSONType(f.Type), omitempty: strings.Contains(opts, "omitempty")})
	}
	return out
}

// goJSONType is the JSON type of a Go type, spelled as schemaType spells
// a JSON schema's.
func goJSONType(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[rexArgv]():
		return "array<string>|string"
	case t == reflect.TypeFor[rexLoc]():
		return "array<integer|string>"
	case t.Kind() == reflect.Pointer:
		return union(goJSONType(t.Elem()), "null")
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Int:
		return "integer"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "string" // a file's bytes
	case t.Kind() == reflect.Slice:
		return "array<" + goJSONType(t.Elem()) + ">"
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		return "object"
	case t.Kind() == reflect.Map:
		return "object<" + goJSONType(t.Elem()) + ">"
	case t.Kind() == reflect.Interface:
		return "any"
	}
	return "go:" + t.String()
}

// schemaType is the JSON type of a property's schema: a type name,
// array<items>, object<values>, alternatives joined by |, or any.
func schemaType(p map[string]any) string {
	if alts, ok := p["anyOf"].([]any); ok {
		var parts []string
		for _, a := range alts {
			parts = append(parts, schemaType(a.(map[string]any)))
		}
		return union(parts...)
	}
	switch typ, _ := p["type"].(string); typ {
	case "":
		return "any"
	case "array":
		return "array<" + schemaType(p["items"].(map[string]any)) + ">"
	case "object":
		if v, ok := p["additionalProperties"].(map[string]any); ok {
			return "object<" + schemaType(v) + ">"
		}
		return "object"
	default:
		return typ
	}
}

func union(alts ...string) string {
	sort.Strings(alts)
	return strings.Join(alts, "|")
}

// checkRexResponse checks that a type msb answers with has the model's
// fields and their types, and writes every field the model requires.
func checkRexResponse(t *testing.T, name string, s jsonSchema, zero any) {
	t.Helper()
	fields := goFields(reflect.TypeOf(zero))
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
		p, ok := s.Properties[f.name]
		switch {
		case !ok:
			t.Errorf("%T.%s: %s has no such field", zero, f.name, name)
		case f.typ != schemaType(p):
			t.Errorf("%T.%s is %s, %s's is %s", zero, f.name, f.typ, name, schemaType(p))
		case f.omitempty && slices.Contains(s.Required, f.name):
			t.Errorf("%T.%s may be left out, %s always has it", zero, f.name, name)
		}
	}
	for p := range s.Properties {
		if !slices.Contains(names, p) {
			t.Errorf("%T lacks %s's field %s", zero, name, p)
		}
	}
}

// checkRexRequest checks a request type against its model: the fields in
// order with their JSON types; then, reading bodies as the route does,
// that it reports every bad field in the model's order, the missing ones
// exactly when the model requires them, and fills in the model's defaults.
func checkRexRequest(t *testing.T, m pyModel, zero any) {
	t.Helper()
	fields := goFields(reflect.TypeOf(zero))
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
		if p, ok := m.Schema.Properties[f.name]; ok && f.typ != schemaType(p) {
			t.Errorf("%T.%s is %s, %s's is %s", zero, f.name, f.typ, m.Name, schemaType(p))
		}
	}
	if !slices.Equal(names, m.Order) {
		t.Fatalf("%T has fields %v, %s has %v", zero, names, m.Name, m.Order)
	}

	// Every field bad or (when required) missing: one refusal per field.
	tag, tagValue := discriminator(m.Schema)
	bad := map[string]any{}
	var wantBad, wantMissing []string
	for _, f := range m.Order {
		if f == tag {
			continue
		}
		wantBad = append(wantBad, f)
		if slices.Contains(m.Schema.Required, f) {
			wantMissing = append(wantMissing, f)
			continue
		}
		bad[f] = badValue(zero)
	}
	_, err := readRexModel(t, zero, tag, tagValue, bad)
	var ve *validationError
	if !errors.As(err, &ve) {
		t.Fatalf("%T from %v: %v, want a validation error", zero, bad, err)
	}
	var gotBad, gotMissing []string
	for _, d := range ve.detail {
		loc := d.Loc
		f := fmt.Sprint(loc[len(loc)-1])
		for _, l := range loc[1:] {
			if s, ok := l.(string); ok && slices.Contains(m.Order, s) {
				f = s
				break
			}
		}
		if len(gotBad) == 0 || gotBad[len(gotBad)-1] != f {
			gotBad = append(gotBad, f)
		}
		if d.Type == "missing" {
			gotMissing = append(gotMissing, f)
		}
	}
	if !slices.Equal(gotBad, wantBad) {
		t.Errorf("%T refuses %v in this order, %s %v", zero, gotBad, m.Name, wantBad)
	}
	if !slices.Equal(gotMissing, wantMissing) {
		t.Errorf("%T requires %v, %s %v", zero, gotMissing, m.Name, wantMissing)
	}

	// Only the required fields: the rest are the model's defaults.
	minimal := map[string]any{}
	for _, f := range m.Schema.Required {
		minimal[f] = "x"
	}
	got, err := readRexModel(t, zero, tag, tagValue, minimal)
	if err != nil {
		t.Fatalf("%T from %v: %v", zero, minimal, err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := json.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	for f, p := range m.Schema.Properties {
		if def, ok := p["default"]; ok && !reflect.DeepEqual(values[f], def) {
			t.Errorf("%T.%s defaults to %#v, %s's to %#v", zero, f, values[f], m.Name, def)
		}
	}
}

// discriminator is the field whose one value tags the model, if any.
func discriminator(s jsonSchema) (field, value string) {
	for f, p := range s.Properties {
		if c, ok := p["const"].(string); ok {
			return f, c
		}
	}
	return "", ""
}

// badValue is a value no field of the model accepts: an object in JSON,
// a string no boolean reads as in the upload form.
func badValue(zero any) any {
	if _, ok := zero.(rexUploadForm); ok {
		return "maybe"
	}
	return map[string]any{"x": 1}
}

// readRexModel reads body as the route reads zero's model: JSON with the
// discriminator tag, or the upload form.
func readRexModel(t *testing.T, zero any, tag, tagValue string, body map[string]any) (any, error) {
	t.Helper()
	if _, ok := zero.(rexUploadForm); ok {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range body {
			if k == "file" {
				w, err := mw.CreateFormFile(k, "upload")
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprint(w, v)
				continue
			}
			if err := mw.WriteField(k, fmt.Sprint(v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/upload", &buf)
		r.Header.Set("Content-Type", mw.FormDataContentType())
		f, err := readUploadForm(r)
		if r.MultipartForm != nil {
			r.MultipartForm.RemoveAll()
		}
		return f, err
	}
	req, ok := reflect.New(reflect.TypeOf(zero)).Interface().(rexRequest)
	if !ok {
		t.Fatalf("%T is neither a JSON request nor the upload form", zero)
	}
	v := newValidator(body, "")
	if tag != "" {
		body[tag] = tagValue
		if err := v.tag(tag, tagValue); err != nil {
			return nil, err
		}
	}
	return req, readRex(v, req)
}
