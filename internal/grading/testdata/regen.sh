#!/bin/sh
# Regenerates the golden logs from the real tools, then the expected JSON:
#   apt-get install -y python3-pytest python3-django python3-sympy
#   sh internal/grading/testdata/regen.sh && go test ./internal/grading -run TestGoldenLogs -update
# The logs in this folder were made with Debian 12's python3 3.11.2,
# pytest 7.2.1, Django 3.2.25 and SymPy 1.11.1. Review the diff of the
# .json files before committing: a change there is a change in grading.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
fx=$here/fixtures
cd "$fx/pytest" || exit 1
$py -m pytest -rA tests/test_sample.py >"$here/pytest/rA.log" 2>&1
$py -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_sample.py >"$here/pytest/rA_tb_no.log" 2>&1
$py -m pytest -v tests/test_sample.py >"$here/pytest/verbose.log" 2>&1
$py -m pytest -rA tests >"$here/pytest/collection_error.log" 2>&1
$py -m pytest -rA tests/test_sample.py >"$here/pytest_options/rA.log" 2>&1
$py -m pytest -rA -vv -o console_output_style=classic --tb=no tests/test_sample.py >"$here/astropy/vv_classic.log" 2>&1
$py -m pytest -rA -p no:cacheprovider --color=yes tests/test_sample.py >"$here/sphinx/color.log" 2>&1
$py -X dev -m pytest -rA --durations 25 -p no:cacheprovider tests/test_sample.py >"$here/sphinx/tox_style.log" 2>&1
$py -m pytest --no-header -rA -p no:cacheprovider tests/test_sample.py >"$here/seaborn/no_header.log" 2>&1
$py -m pytest --no-header -rA -v -p no:cacheprovider tests/test_sample.py >"$here/seaborn/verbose.log" 2>&1
$py -m pytest -rA -p no:cacheprovider tests/test_sample.py >"$here/matplotlib/rA.log" 2>&1
rm -rf .pytest_cache
cd "$fx/django" && $py run.py >"$here/django/verbosity2.log" 2>&1
cd "$fx/sympy" && $py run.py >"$here/sympy/verbose.log" 2>&1
cd "$fx/unittest" && $py -m unittest -v test_sample >"$here/unittest/verbose.log" 2>&1
find "$fx" -name __pycache__ -prune -exec rm -rf {} +
exit 0
