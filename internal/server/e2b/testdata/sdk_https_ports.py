"""E2B's https_ports through the SDK: a sandbox created with
network={"https_ports": [8443, 8445]} has its URL for port 8443 reach a
server there that speaks only HTTPS, with a certificate the daemon does not
trust (the hop into the sandbox is not verified, as on E2B); port 8000,
not listed, stays plain HTTP; a TLS server on a port not listed (8444) and
a plain one on a listed port (8445) answer 502; envd's port in the list is
refused at create. Requests go to the daemon (E2B_API_URL) with the
sandbox URL as their Host, as ingress_test.go's do.

  sdk_https_ports.py CERT KEY   (PEM files of the in-sandbox server)

Prints one JSON object, which https_ports_test.go checks."""
import http.client
import json
import os
import sys
import urllib.parse

from e2b import Sandbox

api = urllib.parse.urlparse(os.environ["E2B_API_URL"])

# Answers a GET over TLS with the Host and path it saw, on the port of argv[1].
TLS_SERVER = r'''
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"host": self.headers["Host"], "path": self.path, "tls": True}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/tmp/tls/cert.pem", "/tmp/tls/key.pem")
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
'''


def get(host, path="/"):
    """GET path from the daemon with Host host: [status, body]."""
    c = http.client.HTTPConnection(api.hostname, api.port, timeout=60)
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return [r.status, body]


def listening(sb, port):
    sb.commands.run(f"for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && exit 0; sleep 0.1; done; exit 1")


out = {}
try:
    Sandbox.create(timeout=60, network={"https_ports": [49983]})
    out["envd_listed"] = "created"
except Exception as e:
    out["envd_listed"] = [type(e).__name__, str(e)]

sb = Sandbox.create(timeout=120, network={"https_ports": [8443, 8445]})
out["sandbox_id"] = sb.sandbox_id
with open(sys.argv[1]) as f:
    sb.files.write("/tmp/tls/cert.pem", f.read())
with open(sys.argv[2]) as f:
    sb.files.write("/tmp/tls/key.pem", f.read())
sb.files.write("/tmp/tls/server.py", TLS_SERVER)
sb.commands.run("python3 /tmp/tls/server.py 8443", background=True)
sb.commands.run("python3 /tmp/tls/server.py 8444", background=True)
sb.commands.run("cd /tmp/tls && python3 -m http.server 8000", background=True)
sb.commands.run("cd /tmp/tls && python3 -m http.server 8445", background=True)
for p in (8443, 8444, 8000, 8445):
    listening(sb, p)
out["host"] = sb.get_host(8443)
status, body = get(sb.get_host(8443), "/a/b?c=d")
out["https"] = [status, json.loads(body) if status == 200 else body]
out["https_again"] = get(sb.get_host(8443), "/again")[0]
status, body = get(sb.get_host(8000), "/server.py")
out["plain"] = [status, "serve_forever" in body]
out["tls_not_listed"] = get(sb.get_host(8444))
out["plain_listed"] = get(sb.get_host(8445))
sb.kill()
print(json.dumps(out))
