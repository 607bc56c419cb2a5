package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesComplete reads every ErrorCode constant declared in the
// package's source and checks that ErrorCodes lists each once, so a code
// added without a row in the front ends' tables fails their tests.
func TestErrorCodesComplete(t *testing.T) {
	declared := declaredErrorCodes(t)
	if !slices.Equal(declared, ErrorCodes) {
		t.Fatalf("ErrorCodes = %v, the package declares %v", ErrorCodes, declared)
	}
}

// declaredErrorCodes parses the package's non-test files for constants
// of type ErrorCode, in declaration order.
func declaredErrorCodes(t *testing.T) []ErrorCode {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []ErrorCode
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ErrorCode" {
				return true
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: an ErrorCode that is not a string literal", fset.Position(v.Pos()))
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, ErrorCode(s))
			}
			return true
		})
	}
	if len(codes) < 10 {
		t.Fatalf("found %d ErrorCode constants: the parse is wrong", len(codes))
	}
	return codes
}
