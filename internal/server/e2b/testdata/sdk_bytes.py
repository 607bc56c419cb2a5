"""What a command's output that is not UTF-8 looks like through the real
e2b SDK (sync): envd's process stream carries the bytes, and the SDK
decodes them, showing U+FFFD for a byte it cannot (E2B's
test_run_with_broken_utf8). Prints one JSON object, which e2b_test.go
checks."""
import json

from e2b import Sandbox

out = {}
sb = Sandbox.create(timeout=120)
long_str = "a" * 8191 + "\\xe2"
r = sb.commands.run(f'printf "{long_str}"')
out["broken_utf8"] = [r.exit_code, len(r.stdout), r.stdout[-2:]]
r = sb.commands.run(r"printf 'x\377y'; printf '\303\251\376' >&2")
out["both"] = [r.stdout, r.stderr]
sb.kill()
print(json.dumps(out))
