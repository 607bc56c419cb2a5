package grading

// The harness's PHP parser: PHPUnit's --testdox output (swebench
// log_parsers/php.py), for phpspreadsheet, laravel, php-cs-fixer and
// carbon. A suite header "Name (Class\Name)" starts a suite; each
// "✔ test" under it is "Name > test". Lines are not stripped, and a test
// before any header belongs to the suite "None", as in the harness.

func init() { registerMultilingual("phpunit", ParsePHPUnit) }

var (
	phpunitSuite = pyRegexp(`^(\w.+) \(.+\)$`)
	phpunitTest  = pyRegexp(`^\s*([✔✘↩])\s*(.*)$`)
)

// ParsePHPUnit is the harness's parse_log_phpunit.
func ParsePHPUnit(log string) StatusMap {
	out := StatusMap{}
	suite := "None"
	words := map[string]Status{"✔": Passed, "✘": Failed, "↩": Skipped}
	for _, line := range pyLines(log) {
		if m := phpunitSuite.FindStringSubmatch(line); m != nil {
			suite = m[1]
			continue
		}
		if m := phpunitTest.FindStringSubmatch(line); m != nil {
			out[suite+" > "+m[2]] = words[m[1]]
		}
	}
	return out
}
