"""Drive PTYs of msb's E2B front end with the real e2b SDK (sync): create,
input, resize, reconnect, kill and exit. Prints one JSON object of what it
saw, which e2b_test.go checks."""
import json
import re

from e2b import CommandExitException, PtySize, Sandbox

out = {}
sb = Sandbox.create(timeout=120)


def reader(handle):
    """A function that reads handle's pty output until it matches pattern."""
    events = iter(handle)
    seen = [b""]

    def until(pattern):
        while not re.search(pattern, seen[0]):
            try:
                _, _, pty = next(events)
            except Exception:
                raise SystemExit("no %r in the pty's output %r" % (pattern, seen[0]))
            seen[0] += pty or b""
        m = re.search(pattern, seen[0])
        seen[0] = seen[0][m.end():]
        return m.group(1).decode()

    return until


h = sb.pty.create(PtySize(rows=24, cols=80), cwd="/tmp", envs={"MSB_PTY": "yes"}, timeout=20)
until = reader(h)
sb.pty.send_stdin(h.pid, b"stty size; [ -t 0 ] && echo tty=$MSB_PTY:$PWD\n")
out["size"] = until(rb"[\r\n](\d+ \d+)(?=\r\n)")
out["tty"] = until(rb"[\r\n](tty=\S+)(?=\r\n)")
sb.pty.send_stdin(h.pid, b"echo $((6*7))\n")
out["answer"] = until(rb"[\r\n](\d+)(?=\r\n)")
sb.pty.resize(h.pid, PtySize(rows=50, cols=100))
sb.pty.send_stdin(h.pid, b"stty size\n")
out["resized"] = until(rb"[\r\n](\d+ \d+)(?=\r\n)")

# A client that leaves and comes back reads what the pty wrote meanwhile.
h.disconnect()
sb.pty.send_stdin(h.pid, b"echo back$((1+1))\n")
until = reader(sb.pty.connect(h.pid))
out["reconnected"] = until(rb"[\r\n](back\d)(?=\r\n)")
out["listed"] = [p.pid for p in sb.commands.list()] == [h.pid]
out["killed"] = sb.pty.kill(h.pid)

h = sb.pty.create(PtySize(rows=24, cols=80))
sb.pty.send_stdin(h.pid, b"exit 3\n")
try:
    out["exit"] = h.wait().exit_code
except CommandExitException as e:
    out["exit"] = e.exit_code
out["listed_after"] = len(sb.commands.list())
sb.kill()
print(json.dumps(out))
