"""Drive msb's E2B front end with the real e2b SDK, unchanged: the caller
sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. Prints one JSON object
of what it saw, which e2b_test.go checks."""
import json

from e2b import CommandExitException, NotFoundException, Sandbox

out = {}
sb = Sandbox.create(metadata={"suite": "e2b-test"}, envs={"GREETING": "hello"}, timeout=120)
r = sb.commands.run("echo hi")
out["stdout"], out["exit_code"] = r.stdout, r.exit_code
try:
    sb.commands.run("echo oops >&2; exit 3")
    out["failed_exit_code"] = None
except CommandExitException as e:
    out["failed_exit_code"], out["failed_stderr"] = e.exit_code, e.stderr
out["env"] = sb.commands.run("echo $GREETING").stdout
sb.files.write("/tmp/e2b-test/hello.txt", "round trip\n")
out["read"] = sb.files.read("/tmp/e2b-test/hello.txt")
out["list"] = sorted(e.name for e in sb.files.list("/tmp/e2b-test"))
out["exists_missing"] = sb.files.exists("/tmp/e2b-test/nope")
out["make_dir"] = [sb.files.make_dir("/tmp/e2b-test/d"), sb.files.make_dir("/tmp/e2b-test/d")]
sb.files.rename("/tmp/e2b-test/d", "/tmp/e2b-test/e")
sb.files.remove("/tmp/e2b-test/hello.txt")
out["after_moves"] = sorted((e.name, e.type.value) for e in sb.files.list("/tmp/e2b-test"))
bg = sb.commands.run("sleep 600", background=True)
out["running"] = [p.pid == bg.pid for p in sb.commands.list()]
out["killed"] = sb.commands.kill(bg.pid)
sb.set_timeout(60)
out["listed"] = [(s.sandbox_id == sb.sandbox_id, s.metadata) for s in Sandbox.list().next_items()]
try:
    Sandbox.get_info("no-such-sandbox")
    out["unknown"] = None
except NotFoundException as e:
    out["unknown"] = type(e).__name__
sb.kill()
out["listed_after_kill"] = len(Sandbox.list().next_items())
print(json.dumps(out))
