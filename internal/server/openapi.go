package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// OpenAPI is the OpenAPI 3 document of the native API, made from the
// route table and the api package's types (docs/openapi.json holds the
// same bytes; a test keeps them equal).
func (s *Server) OpenAPI() []byte {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		p := docPath(rt.path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		paths[p][strings.ToLower(rt.method)] = g.operation(rt)
	}
	paths["/v1/openapi.json"] = map[string]any{"get": map[string]any{"operationId": "openapi", "tags": []string{"daemon"},
		"summary": "this document", "responses": map[string]any{"200": map[string]any{"description": "the OpenAPI document",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}}}}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "msb serve: the native API", "version": "v1",
			"description": "MiniSandbox's daemon: sandboxes, exec, sessions, files, evaluation in a fresh sandbox, batch jobs, gym. See docs/api.md."},
		"paths": paths,
		"components": map[string]any{"schemas": g.defs,
			"securitySchemes": map[string]any{"token": map[string]any{"type": "http", "scheme": "bearer",
				"description": "TCP listeners only; a unix socket needs no token"}}},
		"security": []any{map[string]any{}, map[string]any{"token": []string{}}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(doc)
	return buf.Bytes()
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.OpenAPI())
}

// docPath is a route's path as the document names it: a wildcard's
// "{path...}" (the rest of the path) is "{path}".
func docPath(p string) string { return strings.ReplaceAll(p, "...}", "}") }

var pathParam = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([a-z_]+)\}`) })

// optionalBody lists the routes whose JSON body may be left out.
var optionalBody = map[string]bool{"evaluate": true, "gymSubmit": true, "snapshotSandbox": true, "forkSandbox": true, "forkSnapshot": true, "rollbackSandbox": true}

func (g *schemaGen) operation(rt route) map[string]any {
	op := map[string]any{"operationId": rt.op, "summary": rt.summary, "tags": []string{rt.tag}}
	var params []any
	for _, m := range pathParam().FindAllStringSubmatch(docPath(rt.path), -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range rt.query {
		p := map[string]any{"name": q.name, "in": "query", "required": q.required, "description": q.doc, "schema": map[string]any{"type": q.typ}}
		switch q.name {
		case "path":
			p["schema"] = map[string]any{"type": "string", "pattern": absPath}
		case "mode":
			p["schema"] = map[string]any{"type": "string", "pattern": modePattern}
		case "max_bytes":
			p["schema"] = map[string]any{"type": "integer", "minimum": 1}
		}
		if q.name == "label" {
			p["schema"] = map[string]any{"type": "array", "items": map[string]any{"type": "string", "pattern": "^[^=]+="}}
			p["style"], p["explode"] = "form", true
		}
		params = append(params, p)
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	switch {
	case rt.req != nil:
		op["requestBody"] = map[string]any{"required": !optionalBody[rt.op],
			"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.req))}}}
	case rt.reqType != "":
		bin := map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
		op["requestBody"] = map[string]any{"required": rt.op != "writeFile" && rt.tag != "ports", // an empty file is a file, a proxied body may be none
			"content": map[string]any{rt.reqType: bin, "application/octet-stream": bin}}
	}
	resp := map[string]any{"description": http.StatusText(rt.status)}
	switch {
	case rt.respType != "" && rt.resp != nil:
		resp["content"] = map[string]any{rt.respType: map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp))}}
	case rt.respType != "":
		resp["content"] = map[string]any{rt.respType: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case rt.resp != nil && rt.alt != nil:
		one := []any{g.schema(reflect.TypeOf(rt.resp)), g.schema(reflect.TypeOf(rt.alt))}
		resp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"oneOf": one}}}
	case rt.resp != nil:
		resp["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp))}}
	}
	responses := map[string]any{strconv.Itoa(rt.status): resp}
	errs := append([]int{400, 401, 413, 500, 503}, rt.errors...)
	errBody := g.schema(reflect.TypeOf(api.ErrorBody{}))
	for _, st := range errs {
		responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
			"content": map[string]any{"application/json": map[string]any{"schema": errBody}}}
	}
	op["responses"] = responses
	return op
}

// Patterns the server checks, so that the document says them too.
const (
	modePattern = "^(0?[0-7]{1,4})?$"
	absPath     = "^/[^\\x00]*$"
	optPath     = "^(/[^\\x00]*)?$" // empty: the default
	envPat      = "^[A-Za-z_][A-Za-z0-9_]*=[^\\x00]*$"
	namePat     = "^[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127}$" // api.SessionNamePattern
	optName     = "^([A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127})?$"
	noNUL       = "^[^\\x00]*$"
)

var nonNegative = map[string]any{"minimum": 0}

// constraints add to the schemas of request fields ("Type.field") what the
// server checks beyond their JSON type.
var constraints = map[string]map[string]any{
	"ExecRequest.command":                    {"pattern": noNUL},
	"ExecRequest.cwd":                        {"pattern": optPath},
	"ExecRequest.env":                        {"items": map[string]any{"type": "string", "pattern": envPat}},
	"ExecRequest.session":                    {"pattern": optName},
	"ExecRequest.timeout_ns":                 nonNegative,
	"ExecRequest.max_output":                 nonNegative,
	"SessionRequest.name":                    {"pattern": namePat},
	"SessionRequest.env":                     {"items": map[string]any{"type": "string", "pattern": envPat}},
	"SessionRequest.dir":                     {"pattern": optPath},
	"CreateSandboxRequest.env":               {"items": map[string]any{"type": "string", "pattern": envPat}},
	"CreateSandboxRequest.workdir":           {"pattern": optPath},
	"CreateSandboxRequest.count":             {"minimum": 0, "maximum": engine.MaxBatchCount},
	"CreateSandboxRequest.network":           {"enum": []string{"", "none", "host", "filtered"}},
	"CreateSandboxRequest.session":           {"pattern": optName},
	"CreateSandboxRequest.lifetime_ns":       nonNegative,
	"CreateSandboxRequest.idle_timeout_ns":   nonNegative,
	"CreateSandboxRequest.admission_wait_ns": nonNegative,
	"CreateSandboxRequest.max_output":        nonNegative,
	"GymResetRequest.lifetime_ns":            nonNegative,
	"GymResetRequest.idle_timeout_ns":        nonNegative,
	"GymResetRequest.admission_wait_ns":      nonNegative,
	"GymStepRequest.command":                 {"pattern": noNUL},
	"GymStepRequest.timeout_ns":              nonNegative,
	"Limits.memory_bytes":                    {"anyOf": []any{map[string]any{"enum": []int{0}}, map[string]any{"minimum": minMemory}}},
	"Limits.pids":                            {"anyOf": []any{map[string]any{"enum": []int{0}}, map[string]any{"minimum": minPids, "maximum": maxPids}}},
	"Limits.cpus":                            {"minimum": 0, "maximum": maxCPUs},
	"Limits.tmp_bytes":                       nonNegative,
	"Limits.disk_bytes":                      nonNegative,
	"JobRequest.run_id":                      {"pattern": namePat},
	"JobRequest.kind":                        {"enum": []string{"", "evaluation", "validation"}},
	"JobRequest.workers":                     {"minimum": 0, "maximum": 1024},
	"LoadDatasetRequest.path":                {"pattern": absPath},
	"ForkRequest.count":                      {"minimum": 0, "maximum": engine.MaxForkCount},
	"ForkRequest.processes":                  {"enum": []string{"", "none", "all"}},
	"SnapshotRequest.processes":              {"enum": []string{"", "none", "all"}},
}

// schemaGen turns Go types into JSON schemas, naming structs in defs.
type schemaGen struct {
	defs map[string]any
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t == rawMessage {
		return map[string]any{"type": "object", "description": "a JSON object (a dataset row)"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // recursion guard
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		sc := g.schema(f.Type)
		if f.Type.Kind() == reflect.Pointer && !strings.Contains(opts, "omitempty") {
			sc["nullable"] = true // a pointer always sent: JSON null is a value (model_patch)
		}
		for k, v := range constraints[t.Name()+"."+name] {
			sc[k] = v
		}
		props[name] = sc
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}
