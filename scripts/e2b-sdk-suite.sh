#!/usr/bin/env bash
# Run E2B's own Python SDK test suite against msb's E2B front end (issue 30,
# docs/e2b.md "E2B's own test suite"): a validation command, not part of make test.
#
#   scripts/e2b-sdk-suite.sh SDK_DIR [pytest arguments...]
#
# SDK_DIR is packages/python-sdk of a checkout of github.com/e2b-dev/E2B (it
# holds tests/ and pytest.ini); the pytest arguments after it (files, -k) are
# relative to it. The script
#   - makes a venv with the pinned e2b SDK, pytest and the plugins the tests'
#     pytest.ini and conftest use (E2B_SUITE_VENV, default ~/.cache/msb-e2b-sdk-suite);
#   - starts bin/msb serve (make build) with its E2B listener on loopback, on
#     a state dir and cache of its own, removed at the end
#     (E2B_SUITE_SERVE_FLAGS adds flags, E2B_SUITE_SERVE_LOG keeps its log);
#   - runs pytest on SDK_DIR/tests (or the arguments) with a junit XML
#     (E2B_SUITE_JUNIT, default e2b-sdk-suite.xml in the current directory)
#     and its plugin, scripts/e2b_sdk_suite_plugin.py, which points the SDK at
#     msb (E2B_API_URL, E2B_SANDBOX_URL) through a relay that tells which tests
#     reached msb, skips with its reason every test that
#     scripts/e2b-sdk-suite.reasons names (features E2B's cloud has and msb
#     does not; nothing else goes there), and prints the counts (against msb,
#     SDK alone, unsupported) and the reason of each test that did not pass.
# Run as root (msb's sandboxes), from anywhere.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1/tests" ]; then
	echo "usage: $0 SDK_DIR [pytest args...]   (SDK_DIR: E2B's packages/python-sdk, with tests/)" >&2
	exit 2
fi
sdk=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
msb="$repo/bin/msb"
[ -x "$msb" ] || { echo "$msb missing: run make build" >&2; exit 2; }

# The SDK from PyPI that internal/server/testdata/requirements.txt pins, and
# the test dependencies at the versions of the SDK's uv.lock.
pins=(
	"$(grep -E '^e2b==' "$repo/internal/server/testdata/requirements.txt")"
	pytest==9.1.1 pytest-asyncio==1.4.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0
	python-dotenv==1.2.2 pytest-dotenv==0.5.2
)
venv=${E2B_SUITE_VENV:-$HOME/.cache/msb-e2b-sdk-suite}
stamp="$venv/.msb-pins"
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
	[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
	"$venv/bin/pip" install -q "${pins[@]}"
	echo "${pins[*]}" >"$stamp"
fi

work=$(mktemp -d /tmp/msb-e2b-suite.XXXXXX)
serve_pid=
cleanup() {
	if [ -n "$serve_pid" ]; then
		kill -TERM "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

freeport() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
mkdir "$work/cache"
api=127.0.0.1:$(freeport)
front=127.0.0.1:$(freeport)
MSB_STATE_DIR="$work/state" "$msb" serve --listen "$api" --token-file "$work/token" --e2b "$front" \
	--cache "$work/cache" ${E2B_SUITE_SERVE_FLAGS:-} 2>"$work/serve.log" &
serve_pid=$!
key=$(cat "$work/token")
ready=0
for _ in $(seq 300); do
	if curl -fs -o /dev/null -H "X-API-Key: $key" "http://$front/v2/sandboxes"; then ready=1; break; fi
	kill -0 "$serve_pid" 2>/dev/null || break
	sleep 0.1
done
if [ "$ready" = 0 ]; then echo "msb serve did not answer on $front:" >&2; cat "$work/serve.log" >&2; exit 1; fi

# The plugin points E2B_API_URL and E2B_SANDBOX_URL at a relay to $front
# that tells it which tests reached msb.
export MSB_E2B_SUITE_TARGET="$front" E2B_API_KEY="$key"
unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN
export MSB_E2B_SUITE_REASONS="$here/e2b-sdk-suite.reasons"
export MSB_E2B_SUITE_WHOLE=$([ $# -eq 0 ] && echo 1 || echo 0)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
junit=$(realpath -m "${E2B_SUITE_JUNIT:-e2b-sdk-suite.xml}")
[ $# -gt 0 ] || set -- tests
# The pytest script, not python -m pytest: SDK_DIR holds the SDK's source
# (e2b/), which must not shadow the pinned SDK on sys.path.
rc=0
(cd "$sdk" && "$venv/bin/pytest" -p e2b_sdk_suite_plugin -p no:cacheprovider -o junit_family=xunit2 \
	--continue-on-collection-errors \
	--junit-xml="$junit" -q -rN "$@") || rc=$?
if [ -n "${E2B_SUITE_SERVE_LOG:-}" ]; then cp "$work/serve.log" "$E2B_SUITE_SERVE_LOG"; fi
echo "junit XML: $junit"
exit $rc
