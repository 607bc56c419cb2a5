"""Running processes across a daemon's shutdown (shutdown_procs_test.go).

"before": sandboxes each running a background counter that appends its
token and number to a file, left running for the daemon's shutdown pause.
"after ID...": against a new daemon on the same cache, each is connected;
where its pause kept the processes (msbPause "processes") the counter must
go on with its token and no number lost. Each phase prints one JSON object.
"""
import json
import os
import sys
import time
import urllib.request

from e2b import Sandbox

API = os.environ["E2B_API_URL"]
COUNTER = ': counter-marker; t=$RANDOM$RANDOM; i=0; while :; do echo "$t $i" >> /tmp/count; i=$((i+1)); sleep 0.05; done'
RUNNING = "pgrep -c -f counter-marke[r] || true"  # the pattern does not match itself


def info(sid):
    req = urllib.request.Request(f"{API}/sandboxes/{sid}", headers={"X-API-Key": os.environ["E2B_API_KEY"]})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def lines(sb):
    return [l.split() for l in sb.files.read("/tmp/count").splitlines()]


out = {}
if sys.argv[1] == "before":
    # A pause keeps the processes only of a sandbox whose network namespace
    # the engine made ahead (its pool fills after a create): several.
    out["sandboxes"] = []
    for _ in range(4):
        sb = Sandbox.create(timeout=600)
        sb.commands.run(COUNTER, background=True)
        time.sleep(0.5)
        out["sandboxes"].append({"id": sb.sandbox_id, "before": lines(sb)})
else:
    out["resumes"] = []
    for sid in sys.argv[2:]:
        i = info(sid)
        r = {"id": sid, "state": i.get("state"), "pause": i.get("msbPause"), "pause_mode": i.get("pauseMode")}
        sb = Sandbox.connect(sid, timeout=120)
        r["resumed"] = lines(sb)
        deadline = time.time() + (30 if r["pause"] == "processes" else 1)
        while True:  # until the counter wrote 5 lines after the resume
            r["after"] = lines(sb)
            if len(r["after"]) >= len(r["resumed"]) + 5 or time.time() > deadline:
                break
            time.sleep(0.1)
        r["running"] = sb.commands.run(RUNNING).stdout.strip()
        out["resumes"].append(r)
        sb.kill()
print(json.dumps(out))
