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
#   - makes a CA and a certificate for msb.localhost and *.msb.localhost
#     (openssl), names that glibc's nss-myhostname (libnss-myhostname)
#     resolves to loopback: sandbox URLs by real name resolution, no DNS
#     server;
#   - starts bin/msb serve (make build; E2B_SUITE_MSB names another) with its E2B listener on loopback,
#     over TLS with that certificate, on a state dir, cache and disk pool
#     (MSB_DISK_DIR) of its own, removed at the end (E2B_SUITE_SERVE_FLAGS adds flags,
#     E2B_SUITE_SERVE_LOG keeps its log);
#   - runs pytest on SDK_DIR/tests (or the arguments) with a junit XML
#     (E2B_SUITE_JUNIT, default e2b-sdk-suite.xml in the current directory)
#     and its plugin, scripts/e2b_sdk_suite_plugin.py, which gives the SDK
#     E2B_DOMAIN=msb.localhost:<port> of a relay to msb that tells which tests
#     reached msb (the SDK trusts the CA through SSL_CERT_FILE; its API,
#     envd and get_host's URLs are all https://<name>.msb.localhost:<port>),
#     skips with its reason every test that
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
msb=${E2B_SUITE_MSB:-$repo/bin/msb} # msb-full and msb-sandbox beside it
[ -x "$msb" ] || { echo "$msb missing: run make build (or set E2B_SUITE_MSB)" >&2; exit 2; }

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
	# The daemon's disk pool is the script's own (MSB_DISK_DIR below), kept
	# mounted by msb as a host's is: unmount and delete it before removing
	# $work, which would otherwise leave a loop device behind.
	if [ -d "$work/disk/msb-pool" ] &&
		! MSB_DISK_DIR="$work/disk" MSB_STATE_DIR="$work/state" "$msb" gc --disk-pool >/dev/null; then
		echo "its disk pool stays in $work/disk: $msb gc --disk-pool with MSB_DISK_DIR=$work/disk MSB_STATE_DIR=$work/state removes it" >&2
		return
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# Sandbox URLs by name: the SDK's URLs are https://<name>.<domain>, and
# nss-myhostname resolves every name under .localhost to loopback.
domain=msb.localhost
if ! getent ahosts "49983-probe.$domain" >/dev/null; then
	echo "the system's resolver does not resolve *.$domain: install libnss-myhostname (Debian), which adds myhostname to hosts in /etc/nsswitch.conf (docs/e2b.md \"Sandbox URLs\")" >&2
	exit 2
fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=msb e2b suite CA" \
	-keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$domain" \
	-keyout "$work/key.pem" -out "$work/cert.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:*.%s,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$domain" "$domain" >"$work/cert.ext"
openssl x509 -req -in "$work/cert.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
	-extfile "$work/cert.ext" -out "$work/cert.pem" 2>/dev/null

freeport() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
mkdir "$work/cache"
# A disk pool of its own (root mode; the directory root's, mode 0700), so
# that the suite's volumes never sit in the host's pool beside others'
# sandboxes, and the pool goes at the end (cleanup).
mkdir -m 0700 "$work/disk"
api=127.0.0.1:$(freeport)
front=127.0.0.1:$(freeport)
MSB_STATE_DIR="$work/state" MSB_DISK_DIR="$work/disk" "$msb" serve --listen "$api" --token-file "$work/token" --e2b "$front" \
	--tls-cert "$work/cert.pem" --tls-key "$work/key.pem" \
	--cache "$work/cache" ${E2B_SUITE_SERVE_FLAGS:-} 2>"$work/serve.log" &
serve_pid=$!
key=$(cat "$work/token")
ready=0
for _ in $(seq 300); do
	if curl -fs -o /dev/null --cacert "$work/ca.pem" -H "X-API-Key: $key" "https://$front/v2/sandboxes"; then ready=1; break; fi
	kill -0 "$serve_pid" 2>/dev/null || break
	sleep 0.1
done
if [ "$ready" = 0 ]; then echo "msb serve did not answer on $front:" >&2; cat "$work/serve.log" >&2; exit 1; fi

# The plugin sets E2B_DOMAIN to $domain and the port of a relay to $front
# that tells it which tests reached msb.
export MSB_E2B_SUITE_TARGET="$front" MSB_E2B_SUITE_DOMAIN="$domain" E2B_API_KEY="$key" SSL_CERT_FILE="$work/ca.pem"
unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN E2B_API_URL E2B_SANDBOX_URL
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
