package integrity

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Jest, Mocha and Vitest canary: one test file, named with drawn words
// (DrawNames) and the suffix of the first JavaScript or TypeScript test
// file of the test patch (.test.js, .spec.ts, .js ...), written beside
// it, holding two tests titled with drawn words, one that must pass and
// one that must fail. Which runner and which of its options the instance
// uses is only known in the repository: a helper (jsHelper, run by node)
// reads the test command, follows npm, yarn and pnpm scripts through
// package.json to the last jest, mocha or vitest invocation, keeps its
// options (a --config, mocha's --require, a reporter) and drops its test
// selection (paths, -t, --grep, coverage, --json), and runs that runner
// from node_modules/.bin on the canary file alone (mocha: with --grep on
// the two titles too, as mocha adds a configured spec to the files it is
// given; vitest: "run", with -t on the two titles, its file a filter of
// the files its configuration includes, and the verbose reporter unless
// the command names one). The canary loads the modules the test file
// loads by relative path, so the code under test is loaded, and asserts
// with Jest's expect, Vitest's (imported from vitest) or, under Mocha,
// Node's assert.strictEqual. A test command that runs none of the three,
// or a repository without the runner installed, cannot take it: the run
// says so.

const canaryJS = "js"

// jsCmd matches the test commands a JavaScript canary is tried for.
var (
	jsCmd  = lazyRegexp(`(^|[\s;&|(/])(jest|mocha|vitest|npm|npx|yarn|pnpm)(\s|$)`)
	jsFile = lazyRegexp(`\.[cm]?[jt]sx?$`)
	jsTest = lazyRegexp(`(^|/)(tests?|__tests__|specs?)/|\.(tests?|spec)\.[cm]?[jt]sx?$`)
)

// jsCanary draws the Jest/Mocha/Vitest canary for testCmd.
func jsCanary(testCmd string, testFiles []string) Canary {
	var cands []string
	for _, f := range testFiles {
		if jsFile().MatchString(f) && jsTest().MatchString(f) && safePath(f) {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		return Canary{Note: "canary skipped: the test patch touches no JavaScript or TypeScript test file"}
	}
	names := DrawNames(4, 3)
	c := Canary{Token: token(), lang: canaryJS, candidates: cands, value: names[3].Snake(), testCmd: testCmd}
	c.Pass, c.Fail = strings.Join(names[0], " "), strings.Join(names[1], " ")
	c.File = names[2].Kebab()
	c.Command = "node \"$h\" \"$a\" \"$f\""
	return c
}

// jsArgs is what the helper reads from its argument file, which it
// removes at once (with itself), so that nothing the runner's processes
// can read names the canary.
type jsArgs struct {
	TestCmd string `json:"test_cmd"`
	Pass    string `json:"pass"`
	Fail    string `json:"fail"`
	Stem    string `json:"stem"`
	Value   string `json:"value"`
	Skip    string `json:"skip"`
}

// jsPlace is the part of the script that writes the helper to $h and
// its arguments to $a; the helper writes the canary file beside $f, runs
// it and removes it.
func (c Canary) jsPlace() string {
	delim := "MSB_CANARY_" + c.Token
	args, err := json.Marshal(jsArgs{TestCmd: c.testCmd, Pass: c.Pass, Fail: c.Fail, Stem: c.File, Value: c.value, Skip: c.skipLine()})
	if err != nil {
		panic(err) // strings only
	}
	return fmt.Sprintf("command -v node >/dev/null 2>&1 || { echo '%sno node on PATH'; exit 0; }\n", c.skipLine()) +
		"h=$(mktemp --suffix=.cjs) && a=$(mktemp) || exit 0\n" +
		fmt.Sprintf("cat > \"$h\" <<'%s'\n%s%s\ncat > \"$a\" <<'%s'\n%s\n%s\n", delim, jsHelper, delim, delim, args, delim)
}

// jsHelper is the node program that runs the canary: its arguments are
// the file of its jsArgs and the test file beside which the canary goes.
const jsHelper = `'use strict';
const fs = require('fs');
const path = require('path');
const cp = require('child_process');
const [argFile, first] = process.argv.slice(2);
const { test_cmd: testCmd, pass, fail, stem, value, skip } = JSON.parse(fs.readFileSync(argFile, 'utf8'));
fs.rmSync(argFile, { force: true });
fs.rmSync(__filename, { force: true });
const skipped = (why) => { console.log(skip + why); process.exit(0); };

// words splits a shell command into words and operator objects.
function words(cmd) {
  const out = [];
  let w = null;
  const push = () => { if (w !== null) { out.push(w); w = null; } };
  for (let i = 0; i < cmd.length;) {
    const ch = cmd[i];
    if (ch === "'") {
      let j = cmd.indexOf("'", i + 1);
      if (j < 0) j = cmd.length;
      w = (w || '') + cmd.slice(i + 1, j);
      i = j + 1;
    } else if (ch === '"') {
      let j = i + 1, s = '';
      for (; j < cmd.length && cmd[j] !== '"'; j++) {
        if (cmd[j] === '\\' && j + 1 < cmd.length) j++;
        s += cmd[j];
      }
      w = (w || '') + s;
      i = j + 1;
    } else if (ch === '\\' && i + 1 < cmd.length) {
      w = (w || '') + cmd[i + 1];
      i += 2;
    } else if (/\s/.test(ch)) {
      push();
      i++;
    } else if ('&|;()'.includes(ch)) {
      push();
      let j = i;
      while (j < cmd.length && '&|;()'.includes(cmd[j])) j++;
      out.push({ op: cmd.slice(i, j) });
      i = j;
    } else {
      w = (w || '') + ch;
      i++;
    }
  }
  push();
  return out;
}

function segments(ws) {
  const segs = [[]];
  for (const w of ws) {
    if (typeof w === 'string') segs[segs.length - 1].push(w);
    else segs.push([]);
  }
  return segs.filter((s) => s.length > 0);
}

function runnerOf(w) {
  const b = path.basename(w).replace(/\.c?js$/, '');
  if (b === 'jest') return 'jest';
  if (b === 'mocha' || b === '_mocha') return 'mocha';
  if (b === 'vitest') return 'vitest';
  return null;
}

let scripts = {};
try { scripts = JSON.parse(fs.readFileSync('package.json', 'utf8')).scripts || {}; } catch (e) {}

// scriptCall reads "npm test", "npm run x -- a", "yarn x a", "pnpm run x a".
function scriptCall(seg) {
  let i = 0;
  while (i < seg.length && (/^\w+=/.test(seg[i]) || seg[i] === 'cross-env')) i++;
  const tool = seg[i];
  if (!['npm', 'yarn', 'pnpm'].includes(tool)) return null;
  i++;
  while (i < seg.length && seg[i].startsWith('-')) i++;
  let name = seg[i];
  if (['run', 'run-script'].includes(name)) {
    i++;
    while (i < seg.length && seg[i].startsWith('-')) i++;
    name = seg[i];
  } else if (['t', 'tst'].includes(name)) {
    name = 'test';
  }
  if (!name) return null;
  let args = seg.slice(i + 1);
  if (args[0] === '--') args = args.slice(1);
  return { name, args };
}

function find(cmd, extra, depth, found) {
  const segs = segments(words(cmd));
  segs.forEach((seg, k) => {
    if (k === segs.length - 1) seg = seg.concat(extra);
    const at = seg.findIndex((w) => runnerOf(w));
    if (at >= 0) {
      found.push({ runner: runnerOf(seg[at]), args: seg.slice(at + 1) });
      return;
    }
    const s = scriptCall(seg);
    if (s && depth < 8 && typeof scripts[s.name] === 'string') find(scripts[s.name], s.args, depth + 1, found);
  });
  return found;
}

const valued = {
  jest: {
    keep: ['--config', '-c', '--rootDir', '--roots', '--testEnvironment', '--env', '--maxWorkers', '-w', '--setupFiles', '--setupFilesAfterEnv'],
    drop: ['-t', '--testNamePattern', '--testPathPattern', '--testPathPatterns', '--testPathIgnorePatterns', '--outputFile', '--shard',
      '--selectProjects', '--coverageThreshold', '--coverageDirectory', '--collectCoverageFrom', '--coverageReporters', '--changedSince', '--reporters'],
    flags: ['--json', '--coverage', '--collectCoverage', '--watch', '--watchAll', '-o', '--onlyChanged', '--findRelatedTests', '--listTests',
      '--lastCommit', '--verbose', '--silent', '--bail', '-b'],
  },
  mocha: {
    keep: ['--config', '--require', '-r', '--reporter', '-R', '--timeout', '-t', '--ui', '-u', '--file', '--extension', '--package',
      '--reporter-option', '--reporter-options', '-O', '--slow', '-s', '--retries', '--node-option', '-n'],
    drop: ['--grep', '-g', '--fgrep', '-f', '--spec', '--ignore', '--exclude'],
    flags: ['--watch', '-w', '--invert', '-i', '--parallel', '-p', '--bail', '-b', '--forbid-only', '--forbid-pending', '--dry-run'],
  },
  vitest: {
    keep: ['--config', '-c', '--root', '-r', '--dir', '--environment', '--pool', '--reporter', '--project', '--mode', '--testTimeout',
      '--hookTimeout', '--maxWorkers', '--minWorkers', '--setupFiles'],
    drop: ['-t', '--testNamePattern', '--outputFile', '--shard', '--exclude', '--changed', '--related', '--coverage.include',
      '--coverage.reportsDirectory', '--sequence.seed'],
    flags: ['--watch', '-w', '--run', '--coverage', '--coverage.enabled', '--ui', '--update', '-u', '--bail', '--passWithNoTests',
      '--allowOnly', '--silent', '--no-watch', '--json', '--onlyChanged'],
  },
};

function options(runner, args) {
  const v = valued[runner];
  const out = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!a.startsWith('-') || a === '--') continue;
    const flag = a.split('=')[0];
    if (v.drop.includes(flag) || v.flags.includes(flag)) {
      if (!a.includes('=') && v.drop.includes(flag)) i++;
      continue;
    }
    out.push(a);
    const next = args[i + 1];
    if (a.includes('=') || next === undefined || next.startsWith('-')) continue;
    if (v.keep.includes(flag) || !/[\/*]|\.[cm]?[jt]sx?$/.test(next)) {
      out.push(next);
      i++;
    }
  }
  return out;
}

const found = find(testCmd, [], 0, []);
if (found.length === 0) skipped('the test command runs none of jest, mocha and vitest');
const { runner, args } = found[found.length - 1];

let bin = null;
for (let d = path.resolve(path.dirname(first)); ; d = path.dirname(d)) {
  const b = path.join(d, 'node_modules', '.bin', runner);
  if (fs.existsSync(b)) { bin = b; break; }
  if (d === path.dirname(d)) break;
}
if (bin === null) skipped('no ' + runner + ' in node_modules/.bin');

const base = path.basename(first);
const parts = base.split('.');
const suffix = parts.length >= 3 ? '.' + parts.slice(-2).join('.') : path.extname(base);
const file = path.join(path.dirname(first), stem + suffix);
const ts = /\.[cm]?tsx?$/.test(suffix);

let esm = suffix.endsWith('.mjs');
if (suffix.endsWith('.js')) {
  for (let d = path.resolve(path.dirname(first)); ; d = path.dirname(d)) {
    const p = path.join(d, 'package.json');
    if (fs.existsSync(p)) {
      try { esm = JSON.parse(fs.readFileSync(p, 'utf8')).type === 'module'; } catch (e) {}
      break;
    }
    if (d === path.dirname(d)) break;
  }
}
const loads = [];
if (!ts) {
  const src = fs.readFileSync(first, 'utf8');
  const re = /(?:require\s*\(|import\s*\(|from)\s*['"](\.{1,2}\/[^'"]+)['"]|^\s*import\s*['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (let m; (m = re.exec(src)) !== null;) loads.push(m[1] || m[2]);
}
let src = '';
if (runner === 'mocha') src += ts ? "import * as assert from 'assert';\n" : esm ? "import assert from 'assert';\n" : "const assert = require('assert');\n";
if (loads.length > 0) {
  const load = (esm && runner === 'mocha') || runner === 'vitest' ? 'await import(m);' : 'require(m);';
  src += 'for (const m of ' + JSON.stringify(loads) + ') {\n  try { ' + load + ' } catch (e) {}\n}\n';
}
if (runner === 'vitest') src = "import { test, expect } from 'vitest';\n" + src;
const check = runner !== 'mocha' ? (want) => "expect('" + value + "').toBe('" + want + "')" : (want) => "assert.strictEqual('" + value + "', '" + want + "')";
src += "test('" + pass + "', () => { " + check(value) + '; });\n';
src += "test('" + fail + "', () => { " + check(value + '_') + '; });\n';
if (runner === 'mocha') src = src.replace(/^test\(/gm, 'it(');

const argv = options(runner, args);
if (runner === 'jest') argv.push('--verbose', '--coverage=false', file);
else if (runner === 'mocha') argv.push('--grep', '^(' + pass + '|' + fail + ')$', file);
else {
  if (!argv.some((a) => a.split('=')[0] === '--reporter')) argv.push('--reporter=verbose');
  argv.unshift('run');
  argv.push('--coverage.enabled=false', '-t', '^(' + pass + '|' + fail + ')$', file);
}
fs.writeFileSync(file, src);
try {
  cp.spawnSync(bin, argv, { stdio: 'inherit' });
} finally {
  fs.rmSync(file, { force: true });
}
`
