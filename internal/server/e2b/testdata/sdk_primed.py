"""Drive commands.run through msb's E2B front end with the real e2b SDK
(sync) where the front end hands commands to a primed login shell: every
command after the first of its shape that finds the sandbox quiet. Prints
one JSON object of what it saw, which primed_test.go checks."""
import json
from concurrent.futures import ThreadPoolExecutor

from e2b import CommandExitException, Sandbox

out = {}
sb = Sandbox.create(timeout=120)
# The first command starts a login shell of its own; the front end primes
# the next one after it ends, so it reads this profile.
sb.commands.run("echo 'export FROM_PROFILE=yes' >> ~/.profile")
r = sb.commands.run('echo "$0|$SHLVL|$FROM_PROFILE|$BASH_EXECUTION_STRING"')
out["login"] = r.stdout

try:
    sb.commands.run("echo before; nosuchcommand; exit 3")
    out["failed"] = None
except CommandExitException as e:
    out["failed"] = [e.exit_code, e.stdout, e.stderr]

# One right after another: each takes the shell primed after the last.
out["sequence"] = [sb.commands.run(f"echo {i}").stdout for i in range(20)]

# A write through the files API changes the profile under the waiting shell.
sb.files.write("/home/user/.profile", "export FROM_PROFILE=rewritten\n")
out["after_write"] = [sb.commands.run('echo "$FROM_PROFILE"').stdout for _ in range(2)]

# The command's stdin is /dev/null, as envd gives it (stdin=False): none of
# the command the shell read before it.
out["stdin"] = sb.commands.run("cat; readlink /proc/self/fd/0", timeout=20).stdout

h = sb.commands.run("sleep 30; echo after", background=True)
out["killed"] = sb.commands.kill(h.pid)
try:
    h.wait()
    out["killed_wait"] = None
except CommandExitException as e:
    out["killed_wait"] = [e.exit_code, e.stdout]
out["left"] = sb.commands.run("ps -eo args | grep -c '^sleep 30' || true").stdout

h = sb.commands.run("cat", background=True, stdin=True)
sb.commands.send_stdin(h.pid, "typed\n")
sb.commands.close_stdin(h.pid)
out["with_stdin"] = h.wait().stdout

with ThreadPoolExecutor(8) as pool:
    out["parallel"] = list(pool.map(lambda i: sb.commands.run(f"echo {i}").stdout, range(8)))

out["cwd"] = sb.commands.run("pwd", cwd="/tmp").stdout
out["envs"] = sb.commands.run('echo "$X|$FROM_PROFILE"', envs={"X": "1"}).stdout

sb.pause()
sb = Sandbox.connect(sb.sandbox_id)
out["resumed"] = [sb.commands.run("echo $FROM_PROFILE").stdout for _ in range(2)]
sb.kill()
print(json.dumps(out))
