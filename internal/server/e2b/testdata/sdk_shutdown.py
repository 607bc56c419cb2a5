"""Running sandboxes across a daemon's shutdown, through the e2b SDK,
unchanged: the caller sets the E2B_* variables and MSB_TEST_OPEN_PORT,
MSB_TEST_CLOSED_PORT (listeners on the host's 127.0.0.1), runs "before"
against a daemon that pauses its sandboxes when it stops, stops it, then
runs "after PLAIN_ID" against a new daemon on the same cache (which
shutdown_test.go then calls the other two through envd). Each phase prints
one JSON object of what it saw, which shutdown_test.go checks."""
import json
import os
import sys
from datetime import datetime, timezone

from e2b import CommandExitException, Sandbox, SandboxQuery, SandboxState

open_port, closed_port = os.environ["MSB_TEST_OPEN_PORT"], os.environ["MSB_TEST_CLOSED_PORT"]


def connect(sb, port):
    """What a connect to the host's loopback at port says, bounded."""
    cmd = f"timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/{port} && head -c2 <&3' 2>&1"
    try:
        return sb.commands.run(cmd).stdout
    except CommandExitException as e:
        return f"exit {e.exit_code}: {e.stdout}"


out = {}
if sys.argv[1] == "before":
    # plain: E2B's default lifecycle (killed at its timeout), with network rules
    plain = Sandbox.create(timeout=600, metadata={"run": "s1"}, envs={"TRAINER": "t1"},
                           network={"allow_out": [f"127.0.0.1:{open_port}"], "deny_out": ["0.0.0.0/0"]})
    plain.files.write("/root/note.txt", "written before the shutdown")
    plain.commands.run("sleep 600", background=True)
    # auto: paused at its timeout and resumed by traffic; idle: E2B's default
    auto = Sandbox.create(timeout=600, metadata={"run": "s2"}, lifecycle={"on_timeout": "pause", "auto_resume": True})
    idle = Sandbox.create(timeout=600, metadata={"run": "s3"})
    for sb in (auto, idle):
        sb.files.write("/root/kept.txt", "kept by " + sb.get_info().metadata["run"])
    out["plain"], out["auto"], out["idle"] = plain.sandbox_id, auto.sandbox_id, idle.sandbox_id
    out["user"] = plain.commands.run("whoami").stdout
    out["processes"] = len(plain.commands.list())
else:
    sid = sys.argv[2]
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    out["listed"] = sorted([s.metadata.get("run"), s.state.value] for s in paused)
    info = Sandbox.get_info(sid)
    left = (info.end_at - datetime.now(timezone.utc)).total_seconds()
    out["info"] = [info.state.value, info.lifecycle, 0 < left <= 600]
    sb = Sandbox.connect(sid, timeout=120)
    out["note"] = sb.files.read("/root/note.txt")
    out["env"] = sb.commands.run("echo $TRAINER").stdout
    out["user"] = sb.commands.run("whoami").stdout
    out["processes"] = len(sb.commands.list())  # the sleep did not outlive the daemon
    out["allowed"], out["denied"] = connect(sb, open_port), connect(sb, closed_port)
    out["state"] = Sandbox.get_info(sid).state.value
    sb.kill()
print(json.dumps(out))
