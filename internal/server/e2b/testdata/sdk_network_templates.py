"""Network rules on every kind of template through the e2b SDK: an msb
instance (argv[1]), the same sandbox paused and resumed, and sandboxes
created from snapshots of a base sandbox and of the instance's. The caller
sets the E2B_* variables and MSB_TEST_OPEN_PORT, MSB_TEST_CLOSED_PORT
(listeners on the host's 127.0.0.1). Prints one JSON object of
[allowed, denied] per case, which network_template_test.go checks."""
import json
import os
import sys

from e2b import CommandExitException, Sandbox

instance = sys.argv[1]
open_port, closed_port = os.environ["MSB_TEST_OPEN_PORT"], os.environ["MSB_TEST_CLOSED_PORT"]
rules = {"allow_out": [f"127.0.0.1:{open_port}"], "deny_out": ["0.0.0.0/0"]}


def connect(sb, port):
    """What a connect to the host's loopback at port says, bounded."""
    cmd = f"timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/{port} && head -c2 <&3' 2>&1"
    try:
        return sb.commands.run(cmd).stdout
    except CommandExitException as e:
        return f"exit {e.exit_code}: {e.stdout}"


def both(sb):
    return [connect(sb, open_port), connect(sb, closed_port)]


out = {}
task = Sandbox.create(template=instance, timeout=120, network=rules)
out["instance"] = both(task)
out["instance_cwd"] = [task.commands.run("pwd").stdout.strip(), ""]
snap = task.create_snapshot(name="net-task-snap")
task.pause()
task = Sandbox.connect(task.sandbox_id, timeout=120)
out["instance_resumed"] = both(task)
task.kill()
from_task = Sandbox.create(template=snap.snapshot_id, timeout=120, network=rules)
out["instance_snapshot"] = both(from_task)
from_task.kill()

base = Sandbox.create(timeout=120)
snap = base.create_snapshot(name="net-base-snap")
base.kill()
from_base = Sandbox.create(template=snap.snapshot_id, timeout=120, network=rules)
out["base_snapshot"] = both(from_base)
from_base.kill()
print(json.dumps(out))
