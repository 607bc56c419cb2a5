"""The e2b SDK against a daemon serving TLS (msb serve --tls-cert): the API
and envd at E2B_API_URL=https://127.0.0.1:<port>, the test CA trusted
through SSL_CERT_FILE (the SDK's transport takes the system's roots), a
sandbox created and a command run; then a port's URL,
https://8000-<id>.<E2B_DOMAIN>, reached without DNS: a connection to the
daemon's address with the URL's name as SNI and Host, the certificate
verified against the CA for that name; a name outside the certificate
fails verification; envd's port by name (https://49983-<id>.<domain>,
the SDK's envd URL without E2B_SANDBOX_URL) answers /health. Prints one JSON object, which tls_test.go checks."""
import http.client
import json
import os
import socket
import ssl
import urllib.parse

from e2b import Sandbox

api = urllib.parse.urlparse(os.environ["E2B_API_URL"])
ca = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])

# Answers a GET with the Host and X-Forwarded-Proto it saw.
SERVER = r'''
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"host": self.headers["Host"], "proto": self.headers["X-Forwarded-Proto"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
'''


class AtDaemon(http.client.HTTPSConnection):
    """HTTPS to the daemon's address whatever the name: the name is the
    SNI, the Host and what the certificate is verified for, as if wildcard
    DNS pointed it at the daemon."""

    def connect(self):
        sock = socket.create_connection((api.hostname, api.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def get(name, path="/", headers=None):
    """GET path at https://name:<daemon's port>: [status, body] or the error."""
    c = AtDaemon(name, api.port, context=ca, timeout=60)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return [r.status, r.read().decode()]
    except ssl.SSLCertVerificationError as e:
        return ["verify", e.verify_message]
    finally:
        c.close()


out = {}
sb = Sandbox.create(timeout=120)
out["echo"] = sb.commands.run("echo over tls").stdout
sb.files.write("/tmp/server.py", SERVER)
sb.commands.run("python3 /tmp/server.py", background=True)
sb.commands.run("for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
host = sb.get_host(8000)
out["host"] = host
out["sandbox_id"] = sb.sandbox_id
status, body = get(host)
out["port"] = [status, json.loads(body) if status == 200 else body]
out["other_name"] = get(f"8000-{sb.sandbox_id}.other.test")
# envd by name, as the SDK reaches it without E2B_SANDBOX_URL
out["envd"] = get(sb.get_host(49983), "/health", {"X-Access-Token": sb._envd_access_token})
sb.kill()
print(json.dumps(out))
