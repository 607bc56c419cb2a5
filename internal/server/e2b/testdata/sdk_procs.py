"""Running processes across a pause (pause_procs_test.go, shutdown_procs_test.go).

Each sandbox runs, started through the SDK before the pause:
- a counter (commands.run(..., background=True)) that appends its token and
  number to a file, which must go on from its number with its token;
- through the process API with a tag, cwd and envs: a ticker that prints
  "tick N" once told to start (its output unread by any stream before the
  pause) and a reader that echoes its stdin. After the resume
  commands.list() shows both as before; connect reads the ticker's output
  from "tick 0", nothing lost or twice across the pause; kill ends it with
  its end event; the reader takes input, reads end of file and exits 3.

Modes, each printing one JSON object:
- "pause": paused and resumed through the SDK in one daemon, twice where the
  first resume restored the processes; also a sandbox on a filtered
  network, which cannot be dumped: its pause keeps files only and says why.
- "before": sandboxes left running for the daemon's shutdown pause.
- "after ID...": against a new daemon on the same cache, each is resumed.
"""
import json
import os
import sys
import time
import urllib.request

from e2b import Sandbox
from e2b.connection_config import KEEPALIVE_PING_HEADER, KEEPALIVE_PING_INTERVAL_SEC
from e2b.envd.client_sync import as_stream
from e2b.envd.process import process_pb
from e2b.envd.utils import authentication_header
from e2b.sandbox.commands.command_handle import CommandExitException

API = os.environ["E2B_API_URL"]
COUNTER = ': counter-marker; t=$RANDOM$RANDOM; i=0; while :; do echo "$t $i" >> /tmp/count; i=$((i+1)); sleep 0.05; done'
RUNNING = "pgrep -c -f counter-marke[r] || true"  # the pattern does not match itself
TICKER = 'echo ready; read go; i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.05; done'
READER = 'echo ready; while read l; do echo "got $l"; done; echo eof; exit 3'
ENVS = {"PROC_MARK": "kept"}


def info(sid):
    req = urllib.request.Request(f"{API}/sandboxes/{sid}", headers={"X-API-Key": os.environ["E2B_API_KEY"]})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def lines(sb):
    return [l.split() for l in sb.files.read("/tmp/count").splitlines()]


def start_tagged(sb, cmd, tag):
    """commands.run(cmd, background=True, stdin=True) with a tag, which the
    SDK's commands.run does not send: its own Start request with one."""
    c = sb.commands
    events = as_stream(c._rpc.start(
        process_pb.StartRequest(
            process=process_pb.ProcessConfig(cmd="/bin/bash", args=["-l", "-c", cmd], envs=ENVS, cwd="/tmp"),
            tag=tag, stdin=True),
        headers={**authentication_header(c._envd_version, None), KEEPALIVE_PING_HEADER: str(KEEPALIVE_PING_INTERVAL_SEC)},
        timeout_ms=0))
    return c._create_handle(events, "start process", True)


def start(sb):
    """The counter, the ticker and the reader; the ticker told to start once
    its first stream has ended, so no stream read its ticks."""
    sb.commands.run(COUNTER, background=True)
    procs = {}
    for tag, cmd in (("ticker", TICKER), ("reader", READER)):
        h = start_tagged(sb, cmd, tag)
        for out, _, _ in h:  # up to "ready", then the stream is dropped
            if "ready" in out:
                break
        h.disconnect()
        procs[tag] = h.pid
    sb.commands.send_stdin(procs["ticker"], "go\n")
    return procs


def listed(sb):
    return sorted(({"pid": p.pid, "tag": p.tag, "cmd": p.cmd, "args": p.args, "cwd": p.cwd,
                    "mark": p.envs.get("PROC_MARK")} for p in sb.commands.list()), key=lambda p: p["tag"] or "")


def end_of(h):
    try:
        r = h.wait()
        return {"exit_code": r.exit_code, "stdout": r.stdout}
    except CommandExitException as e:
        return {"exit_code": e.exit_code, "stdout": e.stdout}


def process_api(sb, procs):
    """What the process API says of the processes after the resume."""
    r = {"listed": listed(sb)}
    if not any(p["pid"] == procs["ticker"] for p in r["listed"]):
        return r
    # The ticker from where no stream read it: its first ticks, written
    # before the pause, then what it wrote after.
    h = sb.commands.connect(procs["ticker"], timeout=60)
    text = ""
    for out, _, _ in h:
        text += out
        if text.count("\n") >= 40:
            break
    r["killed"] = sb.commands.kill(procs["ticker"])
    for out, _, _ in h:  # what it wrote before the kill, then its end
        text += out
    r["ticks"] = text.splitlines()
    r["ticker_end"] = end_of(h)
    # The reader: input, end of file, its exit.
    h = sb.commands.connect(procs["reader"], timeout=60)
    sb.commands.send_stdin(procs["reader"], "hello\n")
    sb.commands.close_stdin(procs["reader"])
    r["reader_end"] = end_of(h)
    r["listed_after"] = listed(sb)
    return r


def paused_with_processes():
    """A sandbox running the processes, paused with them."""
    for _ in range(10):
        out["tries"] += 1
        sb = Sandbox.create()
        procs = start(sb)
        time.sleep(0.5)
        before = lines(sb)
        r = {"before": before, "procs": procs, "listed_before": listed(sb)}
        sb.pause()
        out["state"] = Sandbox.get_info(sb.sandbox_id).state.value
        i = info(sb.sandbox_id)
        out["pause"], out["pause_mode"] = i.get("msbPause"), i.get("pauseMode")
        if out["pause"] == "processes":
            return sb, r
        Sandbox.connect(sb.sandbox_id).kill()
    raise SystemExit("no pause kept the processes in 10 sandboxes: " + str(out["pause"]))


def counted(sb, r, since):
    """The counter's file once it wrote 5 lines past since (or it does not
    count), and how many counters run."""
    deadline = time.time() + (30 if r["pause"] == "processes" else 1)
    while True:
        r["after"] = lines(sb)
        if len(r["after"]) >= len(since) + 5 or time.time() > deadline:
            break
        time.sleep(0.1)
    r["running"] = sb.commands.run(RUNNING).stdout.strip()


out = {}
if sys.argv[1] == "pause":
    # A sandbox's control socket is in its network namespace, which CRIU
    # must dump with it, as the engine makes each one, the daemon's first
    # too (the test checks tries is 1): create until a pause keeps the
    # processes, then resume; again (up to 3 resumes) while the restore
    # fails and the resume falls back to the files.
    out = {"tries": 0, "resumes": []}
    for _ in range(3):
        sb, r = paused_with_processes()
        time.sleep(0.5)  # paused: nothing runs
        sb = Sandbox.connect(sb.sandbox_id)
        r["pause"] = r["first_resume"] = info(sb.sandbox_id).get("msbPause")
        if r["pause"] == "processes":
            # Paused again, its processes read by no stream meanwhile.
            r["listed_between"] = listed(sb)
            time.sleep(0.3)
            sb.pause()
            r["second_pause"] = info(sb.sandbox_id).get("msbPause")
            sb = Sandbox.connect(sb.sandbox_id)
            r["pause"] = info(sb.sandbox_id).get("msbPause")
        counted(sb, r, r["before"])
        r.update(process_api(sb, r["procs"]))
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
    out["filtered_listed"] = listed(sb)
    sb.kill()
elif sys.argv[1] == "before":
    # Several sandboxes, each paused with its processes by the shutdown.
    out["sandboxes"] = []
    for _ in range(4):
        sb = Sandbox.create(timeout=600)
        procs = start(sb)
        time.sleep(0.5)
        out["sandboxes"].append({"id": sb.sandbox_id, "before": lines(sb), "procs": procs, "listed_before": listed(sb)})
else:
    out["resumes"] = []
    for arg in sys.argv[2:]:
        sid, ticker, reader = arg.split(",")
        i = info(sid)
        r = {"id": sid, "state": i.get("state"), "pause": i.get("msbPause"), "pause_mode": i.get("pauseMode")}
        sb = Sandbox.connect(sid, timeout=120)
        r["resumed"] = lines(sb)
        counted(sb, r, r["resumed"])
        r.update(process_api(sb, {"ticker": int(ticker), "reader": int(reader)}))
        out["resumes"].append(r)
        sb.kill()
print(json.dumps(out))
