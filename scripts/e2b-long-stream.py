"""Hold one E2B command stream open for a while: a foreground command
silent for HOLD seconds (argument; default 420, past the ~6.5 minutes
after which E2B's gateway cuts HTTP/2 streams), then one line. The e2b
SDK, pointed at an msb daemon by E2B_API_URL, E2B_SANDBOX_URL and
E2B_API_KEY, must get the line and the exit code on the stream that
started the command. A validation command (docs/e2b.md), not a test."""
import sys
import time

from e2b import Sandbox

hold = int(sys.argv[1]) if len(sys.argv) > 1 else 420
sb = Sandbox.create(timeout=hold + 300)
try:
    t0 = time.monotonic()
    lines = []
    res = sb.commands.run(f"sleep {hold}; echo done-after-{hold}", timeout=0, request_timeout=0,
                          on_stdout=lines.append)
    took = time.monotonic() - t0
    print(f"held {took:.1f} s, exit {res.exit_code}, stdout {res.stdout.strip()!r}, streamed {lines!r}")
    ok = res.exit_code == 0 and lines == [f"done-after-{hold}\n"] and took >= hold
finally:
    sb.kill()
sys.exit(0 if ok else 1)
