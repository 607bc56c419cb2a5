"""Traffic to a sandbox's ports through the e2b SDK's sandbox URLs
(get_host: <port>-<sandboxID>.<domain>), unchanged but for the address: the
requests go to the daemon (E2B_API_URL) with the host get_host gave as
their Host header, as a wildcard DNS record for the domain would deliver
them. Prints one JSON object of what it saw, which ingress_test.go checks."""
import http.client
import json
import os
import socket
import time
import urllib.parse

from e2b import Sandbox

api = urllib.parse.urlparse(os.environ["E2B_API_URL"])

# A server that answers a GET with what it saw (Host, X-Forwarded-Host,
# the token header, the path) and a WebSocket upgrade with 101, then echoes what comes.
HEADERS_SERVER = r'''
import json, socket, threading
def handle(c):
    f = c.makefile("rb")
    path = f.readline().split()[1].decode()
    head = {}
    while True:
        l = f.readline()
        if l in (b"\r\n", b"\n", b""):
            break
        k, _, v = l.decode().partition(":")
        head[k.strip().lower()] = v.strip()
    if head.get("upgrade", "").lower() == "websocket":
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        while True:
            b = c.recv(4096)
            if not b:
                break
            c.sendall(b)
    else:
        body = json.dumps({"host": head.get("host"), "forwarded_host": head.get("x-forwarded-host"),
                           "token": head.get("e2b-traffic-access-token"), "path": path}).encode()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8002))
s.listen()
while True:
    threading.Thread(target=handle, args=(s.accept()[0],), daemon=True).start()
'''


def get(host, path="/", headers=None):
    """GET path from the daemon with Host host: [status, body]."""
    c = http.client.HTTPConnection(api.hostname, api.port, timeout=60)
    c.request("GET", path, headers={"Host": host, **(headers or {})})
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return [r.status, body]


def listening(sb, port):
    """Waits in the sandbox until something listens on port."""
    sb.commands.run(f"for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && exit 0; sleep 0.1; done; exit 1")


def websocket(host):
    """An upgrade through the daemon, then one message echoed: [status line, echo]."""
    s = socket.create_connection((api.hostname, api.port), timeout=60)
    s.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    s.sendall(b"ping over the upgrade")
    echo = b""
    while len(echo) < len(b"ping over the upgrade"):
        b = s.recv(4096)
        if not b:
            break
        echo += b
    s.close()
    return [head.split(b"\r\n")[0].decode(), echo.decode()]


def state(sandbox_id):
    return Sandbox.get_info(sandbox_id).state.value


out = {}
sb = Sandbox.create(timeout=120)
sb.files.write("/tmp/www/hello.txt", "hello from the sandbox")
sb.commands.run("cd /tmp/www && python3 -m http.server 8000", background=True)
sb.files.write("/tmp/headers.py", HEADERS_SERVER)
sb.commands.run("python3 /tmp/headers.py", background=True)
listening(sb, 8000)
listening(sb, 8002)
host = sb.get_host(8000)
out["host"] = host
out["sandbox_id"] = sb.sandbox_id
out["served"] = get(host, "/hello.txt")
out["seen"] = json.loads(get(sb.get_host(8002), "/a/b?c=d")[1])
out["websocket"] = websocket(sb.get_host(8002))
out["refused"] = get(sb.get_host(8001))
sb.kill()
out["killed"] = get(host, "/hello.txt")

# allow_public_traffic False: the traffic access token or 403
pv = Sandbox.create(timeout=120, network={"allow_public_traffic": False})
pv.files.write("/tmp/headers.py", HEADERS_SERVER)
pv.commands.run("python3 /tmp/headers.py", background=True)
listening(pv, 8002)
h = pv.get_host(8002)
token = pv.traffic_access_token
with_token = get(h, headers={"e2b-traffic-access-token": token})
out["private"] = [token is not None and token != pv._envd_access_token, get(h), get(h, headers={"e2b-traffic-access-token": "wrong"}),
                  with_token[0], json.loads(with_token[1])["token"]]
child = pv.fork(count=1)[0]
out["forked_private"] = [child.traffic_access_token not in (None, token), get(child.get_host(8002))[0]]
child.kill()
pv.kill()

# network mask_request_host: the server sees the mask, ${PORT} the URL's
# port, and X-Forwarded-Host the URL's host; a fork keeps the mask
mk = Sandbox.create(timeout=120, network={"mask_request_host": "custom-host.example.com:${PORT}"})
mk.files.write("/tmp/headers.py", HEADERS_SERVER)
mk.commands.run("python3 /tmp/headers.py", background=True)
listening(mk, 8002)
seen = json.loads(get(mk.get_host(8002))[1])
out["masked"] = [seen["host"], seen["forwarded_host"] == mk.get_host(8002)]
child = mk.fork(count=1)[0]
child.files.write("/tmp/headers.py", HEADERS_SERVER)
child.commands.run("python3 /tmp/headers.py", background=True)
listening(child, 8002)
out["masked_fork"] = json.loads(get(child.get_host(8002))[1])["host"]
child.kill()
mk.kill()

# auto_resume: a request to a sandbox URL resumes the paused sandbox; its
# processes do not survive msb's pause (files only), so nothing listens
ar = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause", "auto_resume": True})
ar.files.write("/root/kept.txt", "kept")
ar.pause()
out["auto_before"] = state(ar.sandbox_id)
out["auto_request"] = get(ar.get_host(8000))
out["auto_after"] = [state(ar.sandbox_id), ar.files.read("/root/kept.txt")]
ar.kill()

# no auto_resume: a paused sandbox answers as one not running
np = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause"})
np.pause()
out["paused_request"] = get(np.get_host(8000))
out["paused_after"] = state(np.sandbox_id)
np.kill()
print(json.dumps(out))
