package grading

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// The harness's C and C++ parsers (swebench log_parsers/c.py): the Tcl
// test suite's "[ok]: name" lines (redis, valkey), jq's "PASS: name"
// lines, doctest's XML reporter (nlohmann/json), micropython's run-tests
// lines and GoogleTest's "[       OK ] Suite.Test (0 ms)" lines (fmt).

func init() {
	registerMultilingual("redis", ParseRedis)
	registerMultilingual("jq", ParseJq)
	registerMultilingual("doctest", ParseDoctest)
	registerMultilingual("micropython_test", ParseMicropythonTest)
	registerMultilingual("googletest", ParseGoogleTest)
}

var (
	redisLine       = pyRegexp(`^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$`)
	redisErrWhere   = pyRegexp(`\s+in\s+\S+$`)
	jqLine          = pyRegexp(`^\s*(PASS|FAIL):\s(.+)$`)
	micropythonLine = pyRegexp(`^(pass|FAIL|skip)\s+(.+)$`)
	googleTestLine  = pyRegexp(`^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$`)
)

// ParseRedis is the harness's parse_log_redis: a failed test's name loses
// its trailing " in <file>".
func ParseRedis(log string) StatusMap {
	words := map[string]Status{"ok": Passed, "err": Failed, "skip": Skipped, "ignore": Skipped}
	return matchLines(log, redisLine, true, func(m []string) (string, Status, bool) {
		name := m[2]
		if m[1] == "err" {
			name = redisErrWhere.ReplaceAllString(name, "")
		}
		return name, words[m[1]], true
	})
}

// ParseJq is the harness's parse_log_jq.
func ParseJq(log string) StatusMap {
	return matchLines(log, jqLine, true, byWord(2, 1, map[string]Status{"PASS": Passed, "FAIL": Failed}))
}

// ParseMicropythonTest is the harness's parse_log_micropython_test.
func ParseMicropythonTest(log string) StatusMap {
	return matchLines(log, micropythonLine, true, byWord(2, 1, map[string]Status{"pass": Passed, "FAIL": Failed, "skip": Skipped}))
}

// ParseGoogleTest is the harness's parse_log_googletest.
func ParseGoogleTest(log string) StatusMap {
	return matchLines(log, googleTestLine, true, byWord(2, 1, map[string]Status{"OK": Passed, "FAILED": Failed}))
}

// ParseDoctest is the harness's parse_log_doctest, for doctest's -r=xml
// report: the text from the first "<doctest" to the "</doctest>" after it
// is an XML document; each SubCase under a TestCase is "case > subcase",
// passed when all its Expression elements have success="true". Where that
// text is not well-formed XML the harness's parser raises; this one
// returns no statuses.
func ParseDoctest(log string) StatusMap {
	out := StatusMap{}
	start := strings.Index(log, "<doctest")
	if start < 0 {
		return out
	}
	end := strings.Index(log[start:], "</doctest>")
	if end < 0 {
		return out
	}
	root, err := parseXMLTree(log[start : start+end+len("</doctest>")])
	if err != nil {
		return out
	}
	for _, tc := range root.descendants("TestCase") {
		for _, sc := range tc.descendants("SubCase") {
			st := Passed
			for _, e := range sc.descendants("Expression") {
				if e.attr("success") != "true" {
					st = Failed
				}
			}
			out[tc.attrOrNone("name")+" > "+sc.attrOrNone("name")] = st
		}
	}
	return out
}

// xmlNode is an element of a parsed XML document.
type xmlNode struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*xmlNode
}

// errXMLShape is a document that is not one root element.
var errXMLShape = errors.New("not one root element")

// parseXMLTree parses a document of one root element.
func parseXMLTree(doc string) (*xmlNode, error) {
	d := xml.NewDecoder(strings.NewReader(doc))
	var root *xmlNode
	var stack []*xmlNode
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &xmlNode{name: tok.Name, attrs: tok.Attr}
			switch {
			case len(stack) > 0:
				top := stack[len(stack)-1]
				top.children = append(top.children, n)
			case root == nil:
				root = n
			default:
				return nil, errXMLShape
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 && strings.TrimSpace(string(tok)) != "" {
				return nil, errXMLShape
			}
		}
	}
	if root == nil || len(stack) != 0 {
		return nil, errXMLShape
	}
	return root, nil
}

// descendants lists n's descendants named local (no namespace) in
// document order, as ElementTree's findall(".//local") does.
func (n *xmlNode) descendants(local string) []*xmlNode {
	var out []*xmlNode
	var walk func(*xmlNode)
	walk = func(p *xmlNode) {
		for _, c := range p.children {
			if c.name.Space == "" && c.name.Local == local {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(n)
	return out
}

// attr is the value of the attribute named local, or "".
func (n *xmlNode) attr(local string) string {
	v, _ := n.lookup(local)
	return v
}

// attrOrNone is the attribute's value, or "None" where the element has
// none (Python's f-string of get's None).
func (n *xmlNode) attrOrNone(local string) string {
	if v, ok := n.lookup(local); ok {
		return v
	}
	return "None"
}

func (n *xmlNode) lookup(local string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return a.Value, true
		}
	}
	return "", false
}
