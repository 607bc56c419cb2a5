"""A sandbox URL reached by its name through the system's resolver, as a
user's code reaches it: no Host header or SNI set by hand, no address
given. The domain is under .localhost, which glibc's nss-myhostname
(Debian's libnss-myhostname) resolves, every name in it, to loopback.

  sdk_byname.py urls PORT   the SDK at E2B_API_URL (a name too); a port's
                            URL fetched as http://<get_host>:PORT
  sdk_byname.py domain      nothing set but E2B_DOMAIN (<domain>:<port>),
                            E2B_API_KEY and SSL_CERT_FILE: the SDK finds the
                            API at https://api.<domain> and envd at
                            https://49983-<id>.<domain>, and the port's URL
                            is https://<get_host>, as on E2B's cloud

Prints one JSON object, which byname_test.go checks."""
import json
import socket
import sys

import httpx

from e2b import Sandbox

mode = sys.argv[1]
out = {}
sb = Sandbox.create(timeout=120)
out["sandbox_id"] = sb.sandbox_id
out["envd_url"] = sb.envd_api_url
out["echo"] = sb.commands.run("echo by name").stdout
sb.files.write("/tmp/www/hello.txt", "hello by name")
sb.commands.run("cd /tmp/www && python3 -m http.server 8000", background=True)
sb.commands.run("for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
host = sb.get_host(8000)
out["host"] = host
name = host.rsplit(":", 1)[0] if mode == "domain" else host
out["addresses"] = sorted({ai[4][0] for ai in socket.getaddrinfo(name, None)})
url = f"https://{host}/hello.txt" if mode == "domain" else f"http://{host}:{sys.argv[2]}/hello.txt"
r = httpx.get(url, timeout=60)
out["served"] = [r.status_code, r.text]
# A name the daemon has no sandbox for resolves as well and gets E2B's 502.
other = url.replace(sb.sandbox_id, "nosuchsandbox", 1)
r = httpx.get(other, timeout=60)
out["unknown"] = [r.status_code, r.json().get("message")]
sb.kill()
print(json.dumps(out))
