"""Network rules through the e2b SDK, unchanged: the caller sets the E2B_*
variables and MSB_TEST_OPEN_PORT, MSB_TEST_CLOSED_PORT (listeners on the
host's 127.0.0.1). Prints one JSON object of what it saw, which
e2b_test.go checks."""
import json
import os

from e2b import CommandExitException, Sandbox, SandboxException

open_port, closed_port = os.environ["MSB_TEST_OPEN_PORT"], os.environ["MSB_TEST_CLOSED_PORT"]


def connect(sb, port):
    """What a connect to the host's loopback at port says, bounded."""
    cmd = f"timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/{port} && head -c2 <&3' 2>&1"
    try:
        return sb.commands.run(cmd).stdout
    except CommandExitException as e:
        return f"exit {e.exit_code}: {e.stdout}"


out = {}
sb = Sandbox.create(timeout=120, network={"allow_out": [f"127.0.0.1:{open_port}"], "deny_out": ["0.0.0.0/0"]})
out["allowed"], out["denied"] = connect(sb, open_port), connect(sb, closed_port)
# update_network replaces the rules of the running sandbox: the ports swap
sb.update_network({"allow_out": [f"127.0.0.1:{closed_port}"], "deny_out": ["0.0.0.0/0"]})
out["updated_allowed"], out["updated_denied"] = connect(sb, closed_port), connect(sb, open_port)
sb.kill()
# a sandbox started with the host's loopback closed cannot have it opened
sb = Sandbox.create(timeout=120, allow_internet_access=True)
try:
    sb.update_network({"allow_out": [f"127.0.0.1:{open_port}"]})
    out["loopback_update"] = "accepted"
except SandboxException as e:
    out["loopback_update"] = str(e)
sb.kill()
sb = Sandbox.create(timeout=120, allow_internet_access=False)
out["internet_off"] = connect(sb, open_port)
sb.kill()
print(json.dumps(out))
