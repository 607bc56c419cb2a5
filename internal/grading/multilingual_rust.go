package grading

// The harness's Rust parser: libtest's "test path::name ... ok" lines
// (swebench log_parsers/rust.py), for ripgrep, bat, ruff, tokio,
// coreutils, nushell and axum. An ignored test is not recorded.

func init() { registerMultilingual("cargo", ParseCargo) }

var cargoLine = pyRegexp(`^test\s+(\S+)\s+\.\.\.\s+(\w+)$`)

// ParseCargo is the harness's parse_log_cargo.
func ParseCargo(log string) StatusMap {
	return matchLines(log, cargoLine, true, byWord(1, 2, map[string]Status{"ok": Passed, "FAILED": Failed}))
}
