package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json from the route table")

const openapiFile = "../../docs/openapi.json"

// TestOpenAPIDocument: docs/openapi.json is the document the server
// serves (go test -run TestOpenAPIDocument -update rewrites it), and it
// names every route of the table with its types.
func TestOpenAPIDocument(t *testing.T) {
	s := &Server{}
	doc := s.OpenAPI()
	if *update {
		if err := os.WriteFile(openapiFile, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, doc) {
		t.Fatalf("docs/openapi.json is not the served document: run go test ./internal/server -run TestOpenAPIDocument -update")
	}
	var d struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rt := range s.routes() {
		if _, ok := d.Paths[docPath(rt.path)][strings.ToLower(rt.method)]; !ok {
			t.Errorf("%s %s missing from the document", rt.method, rt.path)
		}
		for _, ty := range []any{rt.req, rt.resp} {
			if ty != nil {
				if name := reflect.TypeOf(ty).Name(); d.Components.Schemas[name] == nil {
					t.Errorf("%s %s: schema %s missing", rt.method, rt.path, name)
				}
			}
		}
		n++
	}
	for p, ops := range d.Paths {
		n -= len(ops)
		for _, m := range regexp.MustCompile(`\{[a-z_]+\}`).FindAllString(p, -1) {
			if !strings.Contains(string(mustJSON(ops)), `"name":"`+strings.Trim(m, "{}")+`"`) {
				t.Errorf("%s: path parameter %s undeclared", p, m)
			}
		}
	}
	if n != -1 { // the document's own route
		t.Errorf("the document has %d operations more than the table (+1)", -n-1)
	}
	if d.Components.Schemas["ErrorBody"] == nil || d.Components.Schemas["ErrorInfo"] == nil {
		t.Error("no error body schema")
	}
	_ = api.CodeBadRequest
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
