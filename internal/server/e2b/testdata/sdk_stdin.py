"""Drive stdin and reconnection of msb's E2B front end with the real e2b
SDK (sync). Prints one JSON object of what it saw, which e2b_test.go
checks."""
import json

from e2b import Sandbox

out = {}
sb = Sandbox.create(timeout=120)

h = sb.commands.run("cat", background=True, stdin=True)
sb.commands.send_stdin(h.pid, "hello\n")
sb.commands.send_stdin(h.pid, b"world\n")
sb.commands.close_stdin(h.pid)
r = h.wait()
out["sent"] = [r.stdout, r.exit_code]

h = sb.commands.run("wc -c", background=True, stdin=True)
sb.commands.stream_input(h.pid, iter(["ab", b"cd", "\u00e9"]))
h.close_stdin()
out["streamed"] = h.wait().stdout.strip()

# A client that leaves and comes back: the process runs on, and the new
# stream starts where the old one left off.
h = sb.commands.run("cat", background=True, stdin=True)
sb.commands.send_stdin(h.pid, "first\n")
seen = ""
for stdout, _, _ in h:
    seen += stdout or ""
    if seen == "first\n":
        break
h.disconnect()
sb.commands.send_stdin(h.pid, "second\n")
out["listed_while_away"] = [p.pid for p in sb.commands.list()] == [h.pid]
again = sb.commands.connect(h.pid)
sb.commands.send_stdin(h.pid, "third\n")
sb.commands.close_stdin(h.pid)
r = again.wait()
out["reconnected"] = [seen, r.stdout, r.exit_code]
out["listed_after_end"] = len(sb.commands.list())

try:
    p = sb.commands.run("true", background=True)
    p.wait()
    sb.commands.send_stdin(p.pid, "x")
    out["no_stdin"] = None
except Exception as e:  # the process ended, or never had stdin
    out["no_stdin"] = type(e).__name__
sb.kill()
print(json.dumps(out))
