#!/usr/bin/env bash
# Time msb serve --e2b's shutdown pause (docs/e2b.md "At shutdown"): a
# measurement, not part of make test.
#
#   scripts/e2b-shutdown-pause.sh N BYTES [ROUNDS]
#
# Starts msb serve --e2b (MSB, default bin/msb: make build) on a state dir and
# cache of its own, creates N sandboxes on base, writes a file of BYTES random
# bytes into each through envd, sends SIGTERM, and prints one line per round:
# how many sandboxes were recorded paused, the log's took= (the pauses) and
# SIGTERM -> exit. Needs curl and python3; run as root (or rootless) from the
# checkout.
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 N BYTES [ROUNDS]" >&2
	exit 2
fi
n=$1 size=$2 rounds=${3:-1}
msb=${MSB:-bin/msb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo key >"$work/token"
head -c "$size" /dev/urandom >"$work/blob"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port

for _ in $(seq "$rounds"); do
	rm -rf "$work/state" "$work/cache" "$work/log"
	MSB_STATE_DIR=$work/state MSB_CACHE=$work/cache MSB_CONFIG= "$msb" serve --listen "unix://$work/msb.sock" \
		--token-file "$work/token" --e2b "127.0.0.1:$port" >"$work/log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		curl -sf -H 'X-API-Key: key' "$url/v2/sandboxes" >/dev/null && break
		sleep 0.1
	done
	for _ in $(seq "$n"); do
		read -r id token < <(curl -sf -H 'X-API-Key: key' -H 'Content-Type: application/json' -d '{"timeout": 3600}' "$url/v2/sandboxes" |
			python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["sandboxID"], d["envdAccessToken"])')
		curl -sf -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $token" -H 'Content-Type: application/octet-stream' \
			--data-binary @"$work/blob" "$url/files?path=/root/blob" >/dev/null
	done
	t0=$(date +%s.%N)
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	t1=$(date +%s.%N)
	took=$(grep -o 'paused for the next daemon.*' "$work/log" | grep -o 'took=[^ ]*' || echo 'took=none')
	paused=$(find "$work/cache/e2b-state/paused" -name '*.json' 2>/dev/null | wc -l)
	echo "sandboxes=$n bytes=$size exit=$rc paused=$paused $took stop=$(python3 -c "print(round($t1 - $t0, 3))")s load=$(cut -d' ' -f1 /proc/loadavg)"
	[ "$rc" = 0 ] || tail -5 "$work/log" >&2
done
