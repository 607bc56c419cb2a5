"""A sandbox's lifecycle through the real e2b SDK (sync): on_timeout pause
instead of kill, connect after it, auto_resume by an envd call, and what
get_info says. Prints one JSON object of what it saw, which
lifecycle_test.go checks."""
import json
import time

from e2b import Sandbox, SandboxQuery, SandboxState


def wait_state(sandbox_id, state):
    """Polls get_info until the sandbox is in state; a minute at most (the
    test's timeouts are a second: this bounds a stuck front end only)."""
    deadline = time.monotonic() + 60
    while True:
        got = Sandbox.get_info(sandbox_id).state.value
        if got == state or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


out = {}
plain = Sandbox.create(timeout=120)
out["default_lifecycle"] = Sandbox.get_info(plain.sandbox_id).lifecycle
plain.kill()

# on_timeout pause: the timeout pauses it, as pause() would
sb = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause"})
sb.files.write("/root/kept.txt", "before the timeout")
out["lifecycle"] = Sandbox.get_info(sb.sandbox_id).lifecycle
sb.set_timeout(0)  # the timeout now, as E2B's own tests force it
out["after_timeout"] = wait_state(sb.sandbox_id, "paused")
out["listed_paused"] = [s.sandbox_id for s in Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()]
try:
    sb.commands.run("true")
    out["envd_while_paused"] = "ran"
except Exception as e:  # no auto_resume: envd calls find no sandbox
    out["envd_while_paused"] = type(e).__name__
again = Sandbox.connect(sb.sandbox_id, timeout=120)
out["resumed"] = [again.files.read("/root/kept.txt"), Sandbox.get_info(sb.sandbox_id).state.value,
                  Sandbox.get_info(sb.sandbox_id).lifecycle["on_timeout"]]
again.kill()

# auto_resume: an envd call resumes the paused sandbox
ar = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause", "auto_resume": True})
ar.files.write("/root/kept.txt", "auto")
out["auto_lifecycle"] = Sandbox.get_info(ar.sandbox_id).lifecycle
ar.set_timeout(1)
out["auto_after_timeout"] = wait_state(ar.sandbox_id, "paused")
out["auto_resumed"] = [ar.commands.run("cat /root/kept.txt").stdout, Sandbox.get_info(ar.sandbox_id).state.value]
ar.kill()

# the SDK refuses auto_resume with a filesystem-only pause itself
try:
    Sandbox.create(timeout=60, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}, "auto_resume": True})
    out["filesystem_auto_resume"] = "created"
except Exception as e:
    out["filesystem_auto_resume"] = type(e).__name__
# a filesystem-only pause is what msb's pause is: accepted
fs = Sandbox.create(timeout=60, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}})
out["filesystem_lifecycle"] = Sandbox.get_info(fs.sandbox_id).lifecycle
fs.kill()
print(json.dumps(out))
