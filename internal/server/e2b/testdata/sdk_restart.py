"""A template and a paused sandbox across a daemon restart, through the
e2b SDK, unchanged: the caller sets the E2B_* variables and
MSB_TEST_OPEN_PORT, MSB_TEST_CLOSED_PORT (listeners on the host's
127.0.0.1), runs "before" against one daemon, restarts it on the same
cache, then runs "after SANDBOX_ID SNAPSHOT_SANDBOX_ID" against the new
one. Each phase
prints one JSON object of what it saw, which restart_test.go checks."""
import json
import os
import sys

from e2b import CommandExitException, Sandbox, SandboxQuery, SandboxState, Template

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
    tpl = Template().from_template("base").set_envs({"BUILT": "yes"}).run_cmd("echo from-build > /home/user/built.txt")
    Template.build(tpl, "msb-restart:v1")
    Template.assign_tags("msb-restart:v1", ["prod"])
    sb = Sandbox.create("msb-restart", timeout=120, metadata={"run": "r1"}, envs={"TRAINER": "t1"},
                        network={"allow_out": [f"127.0.0.1:{open_port}"], "deny_out": ["0.0.0.0/0"]})
    sb.files.write("/home/user/note.txt", "written before the restart")
    sb.commands.run("echo $BUILT > /home/user/env.txt")
    sb.pause()
    out["sandbox"] = sb.sandbox_id
    # a snapshot of a resumed sandbox: its engine sandbox is not the E2B one
    other = Sandbox.create("msb-restart", timeout=120)
    other.pause()
    other = Sandbox.connect(other.sandbox_id, timeout=120)
    other.files.write("/home/user/snap.txt", "in the snapshot")
    other.create_snapshot(name="msb-restart-snap")
    other.kill()
    out["snapshot_of"] = other.sandbox_id
else:
    sid, snapshot_of = sys.argv[2], sys.argv[3]
    out["snapshots"] = [s.snapshot_id for s in Sandbox.list_snapshots(sandbox_id=snapshot_of).next_items()]
    sb = Sandbox.create("msb-restart-snap", timeout=120)
    out["from_snapshot"] = sb.files.read("/home/user/snap.txt")
    sb.kill()
    Sandbox.delete_snapshot("msb-restart-snap")
    out["exists"] = Template.exists("msb-restart")
    out["tags"] = sorted(t.tag for t in Template.get_tags("msb-restart"))
    for ref in ("msb-restart", "msb-restart:prod"):
        sb = Sandbox.create(ref, timeout=120)
        out.setdefault("created", []).append(sb.commands.run("cat /home/user/built.txt; echo $BUILT").stdout)
        sb.kill()
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    out["listed"] = [[s.sandbox_id == sid, s.metadata, s.template_id] for s in paused]
    sb = Sandbox.connect(sid, timeout=120)
    out["note"] = sb.files.read("/home/user/note.txt")
    out["env"] = sb.commands.run("cat /home/user/env.txt; echo $TRAINER").stdout
    out["allowed"], out["denied"] = connect(sb, open_port), connect(sb, closed_port)
    sb.pause()
    sb = Sandbox.connect(sid, timeout=120)  # and once more within this daemon
    out["again"] = sb.files.read("/home/user/note.txt")
    sb.pause()
    Sandbox.kill(sid)
    out["after_kill"] = [s.sandbox_id for s in Sandbox.list().next_items()]
print(json.dumps(out))
