"""Pause and resume keep a sandbox's running processes (pause_procs_test.go).

A background counter (commands.run(..., background=True)) appends its token
and number to a file; the sandbox is paused and resumed through the SDK; the
counter must go on from its number with its token. A sandbox on a filtered
network (network rules) cannot be dumped: its pause keeps files only and says
why. Prints one JSON object.
"""
import json
import os
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


def paused_with_processes():
    """A sandbox running the counter, paused with its processes."""
    for _ in range(10):
        out["tries"] += 1
        sb = Sandbox.create()
        sb.commands.run(COUNTER, background=True)
        time.sleep(0.5)
        before = lines(sb)
        sb.pause()
        out["state"] = Sandbox.get_info(sb.sandbox_id).state.value
        i = info(sb.sandbox_id)
        out["pause"], out["pause_mode"] = i.get("msbPause"), i.get("pauseMode")
        if out["pause"] == "processes":
            return sb, before
        Sandbox.connect(sb.sandbox_id).kill()
    raise SystemExit("no pause kept the processes in 10 sandboxes: " + str(out["pause"]))


# A sandbox's control socket is in its network namespace, which CRIU must
# dump with it, only when the engine made the namespace ahead (its pool
# fills after a create): create until a pause keeps the processes, then
# resume; again (up to 3 resumes) while the restore fails and the resume
# falls back to the files.
out = {"tries": 0, "resumes": []}
for _ in range(3):
    sb, before = paused_with_processes()
    time.sleep(0.5)  # paused: the counter does not count
    sb = Sandbox.connect(sb.sandbox_id)
    r = {"pause": info(sb.sandbox_id).get("msbPause"), "before": before}
    deadline = time.time() + (30 if r["pause"] == "processes" else 1)
    while True:  # until the counter wrote 5 lines after the pause
        r["after"] = lines(sb)
        if len(r["after"]) >= len(before) + 5 or time.time() > deadline:
            break
        time.sleep(0.1)
    r["running"] = sb.commands.run(RUNNING).stdout.strip()
    out["resumes"].append(r)
    sb.kill()
    if r["pause"] == "processes":
        break

sb = Sandbox.create(network={"deny_out": ["0.0.0.0/0"]})
sb.commands.run(COUNTER, background=True)
sb.pause()
i = info(sb.sandbox_id)
out["filtered_pause"], out["filtered_pause_mode"] = i.get("msbPause"), i.get("pauseMode")
sb = Sandbox.connect(sb.sandbox_id)
out["filtered_running"] = sb.commands.run(RUNNING).stdout.strip()
sb.kill()
print(json.dumps(out))
