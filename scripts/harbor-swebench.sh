#!/usr/bin/env bash
# Run one SWE-bench Verified instance through Harbor's SWE-bench adapter on
# msb's E2B front end, and compare Harbor's reward with msb eval's verdict
# for the same patches (issue 30; docs/e2b.md "Harbor's SWE-bench adapter").
# A validation command, not part of make test: it builds a Debian root
# (mmdebstrap) and the instance's environment, and the task's sandboxes reach
# PyPI.
#
#   scripts/harbor-swebench.sh ADAPTER_DIR [INSTANCE_ID]
#
# ADAPTER_DIR is adapters/swebench of a checkout of Harbor's repository.
# INSTANCE_ID defaults to psf__requests-6028: its tests run offline, and
# neither the adapter nor the test.sh's parser (the harness's make_test_spec)
# fetches a requirements file from GitHub for it, as they do for Flask and
# Django, whose files this host cannot reach. The script
#   1. makes a Debian bookworm root with mmdebstrap (python3, python3-venv,
#      git, patch, curl, ca-certificates) and, unless the spec's Python is
#      bookworm's 3.11, the host's interpreter of the spec's version (pyenv's,
#      PYENV_ROOT) copied in at its own path; imports it into a cache of its
#      own (msb cache import-rootfs) and builds the instance's environment on
#      it (msb cache build, from PyPI through msb's proxy, the repository from
#      REPO_SOURCE); then grades the gold and the empty patch with msb eval.
#      The root keeps bookworm's python3.11 as the harness's images keep
#      conda's own Python (3.11) on PATH beside the testbed env: the
#      adapter's parser asks uv for Python >= 3.11, and uv would otherwise
#      download one from GitHub;
#   2. exports the instance's task root with msb cache export-image
#      --conda-shim, named as the harness names its image
#      (swebench/sweb.eval.x86_64.<id, __ as _1776_>:latest), and imports it,
#      so the adapter's FROM resolves to it;
#   3. makes the task with the adapter (scripts/harbor_swebench_task.py, in a
#      venv with the swebench package, ADAPTER_VENV) and replaces one line of
#      its Dockerfile: the uv install from astral.sh, which this host cannot
#      reach, by uv 0.7.13 (the version the adapter pins) from PyPI into
#      /root/.local/bin, where the installer puts it; when HOST_CA names a CA
#      bundle (default: the host's, when /usr/local/share/ca-certificates
#      holds a CA of its own, as behind a TLS-intercepting egress proxy) the
#      image gets it as its bundle, and pip and uv are told to use it;
#   4. starts msb serve --e2b --build-network on that cache and runs
#      harbor run -e e2b twice: agent oracle (the adapter's solve.sh applies
#      the gold patch) and agent nop (no patch); the verifier is the
#      adapter's tests/test.sh (the harness's eval script, then its parser
#      under uv run, fetching swebench 4.0.3 from PyPI);
#   5. prints both rewards beside msb's verdicts; exit 0 when they agree.
# Environment: MSB (default bin/msb), HARBOR (default .venv-harbor/bin/harbor,
# make pyenv-harbor), DATASET (default ../shared/datasets/swe-bench-verified.jsonl),
# REPO_SOURCE (owner/name=PATH or URL, msb's --repo-source; default the
# repository's GitHub URL), WORK (default a temp dir, removed unless KEEP=1).
# Run as root, from anywhere.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -f "$1/adapter.py" ] || [ ! -d "$1/template" ]; then
	echo "usage: $0 ADAPTER_DIR [INSTANCE_ID]   (ADAPTER_DIR: adapters/swebench of Harbor's repository)" >&2
	exit 2
fi
adapter=$(cd "$1" && pwd)
instance=${2:-psf__requests-6028}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
msb=${MSB:-$repo/bin/msb}
harbor=${HARBOR:-$repo/.venv-harbor/bin/harbor}
dataset=${DATASET:-$repo/../shared/datasets/swe-bench-verified.jsonl}
[ -f "$dataset" ] || { echo "no dataset $dataset: set DATASET to SWE-bench Verified as JSONL" >&2; exit 2; }
dataset=$(realpath "$dataset")
[ -x "$msb" ] || { echo "$msb missing: run make build" >&2; exit 2; }
[ -x "$harbor" ] || { echo "$harbor missing: run make pyenv-harbor" >&2; exit 2; }
row=$(grep -m1 "\"instance_id\": *\"$instance\"" "$dataset") || { echo "$instance is not in $dataset" >&2; exit 2; }
gh=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["repo"])' "$row")
repo_source=${REPO_SOURCE:-$gh=https://github.com/$gh}
image="swebench/sweb.eval.x86_64.${instance//__/_1776_}:latest"
if [ -z "${HOST_CA+x}" ] && compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	HOST_CA=/etc/ssl/certs/ca-certificates.crt
fi

work=${WORK:-$(mktemp -d /tmp/msb-harbor-swebench.XXXXXX)}
mkdir -p "$work"
export MSB_CACHE="$work/cache" MSB_STATE_DIR="$work/state" MSB_CONFIG="$work/config.yaml"
mkdir -p "$MSB_CACHE" "$MSB_STATE_DIR"
python=$(MSB_CONFIG= "$msb" spec show "$instance" --dataset "$dataset" | sed -n 's/^python: "\(.*\)"$/\1/p')
interp=/usr/bin/python$python
if [ "$python" != 3.11 ]; then
	prefix=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$python".* 2>/dev/null | sort -V | tail -1)
	[ -x "$prefix/bin/python$python" ] || { echo "no Python $python under ${PYENV_ROOT:-$HOME/.pyenv}/versions" >&2; exit 2; }
	interp=$prefix/bin/python$python
fi
# Every command builds or finds the environment on the imported root.
cat >"$MSB_CONFIG" <<EOF
base: base/rootfs
pythons: {"$python": $interp}
repo_sources: {"${repo_source%%=*}": "${repo_source#*=}"}
EOF
serve_pid=
cleanup() {
	if [ -n "$serve_pid" ]; then
		kill -TERM "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	if [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
step() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

# 1. The root, the environment, msb's verdicts.
step "Debian root and $instance's environment"
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,git,patch,curl,ca-certificates \
	bookworm "$work/rootfs" http://deb.debian.org/debian
if [ -n "${prefix:-}" ]; then
	mkdir -p "$work/rootfs$(dirname "$prefix")"
	cp -a "$prefix" "$work/rootfs$prefix"
fi
"$msb" cache import-rootfs "$work/rootfs"
rm -rf "$work/rootfs"
"$msb" cache build --dataset "$dataset" --instances "$instance" --build-network
printf '{"instance_id": "%s", "model_name_or_path": "empty", "model_patch": ""}\n' "$instance" >"$work/empty.jsonl"
verdict() { # model predictions: msb eval's outcome of the instance
	"$msb" eval --dataset "$dataset" --instances "$instance" --predictions "$2" --run-id harbor --out "$work/eval" >"$work/eval-$1.txt" 2>&1 || true
	python3 -c 'import json,sys; print(*[o for o, ids in json.load(open(sys.argv[1]))["outcomes"].items() if sys.argv[2] in ids])' \
		"$work/eval/harbor/$1.harbor.json" "$instance" 2>/dev/null | grep . || echo "none (see $work/eval-$1.txt)"
}
step "msb eval: gold and empty patch"
msb_gold=$(verdict gold gold)
msb_empty=$(verdict empty "$work/empty.jsonl")

# 2. The harness's image, as msb has it.
step "export $instance as $image"
"$msb" cache export-image --dataset "$dataset" --conda-shim "$instance" "oci-archive:$work/image.tar:$image"
"$msb" cache import-image "oci-archive:$work/image.tar"
rm "$work/image.tar"

# 3. The adapter's task.
step "the adapter's task"
venv=${ADAPTER_VENV:-$HOME/.cache/msb-harbor-swebench-adapter}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import swebench' 2>/dev/null; then
	"$(dirname "$(realpath "$harbor")")/python" -m venv "$venv"
	"$venv/bin/pip" install -q swebench==4.1.0
fi
task=$("$venv/bin/python" "$here/harbor_swebench_task.py" "$adapter" "$dataset" "$instance" "$work/tasks" | tail -1)
dockerfile="$task/environment/Dockerfile"
uv_line='RUN curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh'
grep -qxF "$uv_line" "$dockerfile" || { echo "$dockerfile has no line '$uv_line': a newer adapter?" >&2; exit 1; }
{
	if [ -n "${HOST_CA:-}" ]; then
		cp "$HOST_CA" "$task/environment/host-ca.crt"
		echo "COPY host-ca.crt /etc/ssl/certs/ca-certificates.crt"
		echo "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt"
	fi
	echo "RUN python3 -m venv /opt/uv && /opt/uv/bin/pip install -q uv==0.7.13 && mkdir -p /root/.local/bin && ln -sf /opt/uv/bin/uv /root/.local/bin/uv"
} >"$work/uv-lines"
python3 - "$dockerfile" "$uv_line" "$work/uv-lines" <<'EOF'
import sys
path, line, new = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
text = open(path).read()
open(path, "w").write(text.replace(line + "\n", new, 1))
EOF
grep -E '^(FROM|COPY|ENV|RUN|WORKDIR)' "$dockerfile"

# 4. Harbor on msb's E2B front end.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo harbor-swebench >"$work/token"
"$msb" serve --listen "unix://$work/msb.sock" --token-file "$work/token" --e2b "127.0.0.1:$port" \
	--build-network >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
	curl -s -o /dev/null "http://127.0.0.1:$port/health" && break
	sleep 0.2
done
reward() { # agent: Harbor's reward of the task's trial with that agent
	step "harbor run -a $1"
	E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port" E2B_API_KEY=harbor-swebench \
		LITELLM_LOCAL_MODEL_COST_MAP=True "$harbor" run -p "$task" -a "$1" -e e2b -o "$work/jobs-$1" -n 1 \
		>"$work/harbor-$1.txt" 2>&1 || true
	local r
	r=$(cat "$work"/jobs-"$1"/*/*/verifier/reward.txt 2>/dev/null) || r="none (see $work/harbor-$1.txt)"
	echo "$r"
}
harbor_gold=$(reward oracle)
harbor_empty=$(reward nop)

# 5. Side by side.
agree() { # reward outcome: 1 and resolved, or 0 and any other outcome
	{ [ "$1" = 1 ] && [ "$2" = resolved ]; } || { [ "$1" = 0 ] && [ "$2" != resolved ] && [ "${2%% *}" != none ]; }
}
printf '\n%-12s %-22s %-22s %s\n' patch "Harbor reward (e2b)" "msb eval outcome" agree
ok=0
for p in gold empty; do
	h=harbor_$p m=msb_$p a=yes
	agree "${!h}" "${!m}" || { a=no; ok=1; }
	printf '%-12s %-22s %-22s %s\n' "$p" "${!h}" "${!m}" "$a"
done
exit $ok
