"""Fixtures: a real msb daemon built from this tree, on the demo's dataset.

``demo`` runs ``msb demo --dir`` once per session (a real git repository,
a venv environment, four instances); ``daemon`` starts ``msb serve`` on a
unix socket in a temp dir over the demo's cache, ``tcp_daemon`` one on a
loopback port with a token, and ``tls_daemon`` one over https (``certs``: a
CA and a certificate for 127.0.0.1 made with the openssl command). Nothing
here is mocked: every test talks to the real binary (``bin/msb`` of the
repository, or ``$MSB_BIN``). Each daemon is stopped with SIGTERM at the
end, and the test checks that it exited cleanly and left no sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, List

import pytest

import msb

# Harbor needs Python >= 3.12: its test runs in a venv of its own (make test).
try:
    import harbor  # noqa: F401
    collect_ignore: List[str] = []
except ImportError:
    collect_ignore = ["test_harbor.py"]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def msb_bin() -> str:
    """The msb binary under test."""
    path = os.environ.get("MSB_BIN") or os.path.join(REPO, "bin", "msb")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: run `make build` (or set MSB_BIN)")
    return path


@dataclass
class Demo:
    """The demo's files: dataset, spec, cache, and its instances."""

    dir: str
    dataset: str
    spec: str
    cache: str
    rows: List[dict]

    def row(self, iid: str) -> dict:
        return next(r for r in self.rows if r["instance_id"] == iid)


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="msb-pytest-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def demo(tmp_root: str) -> Demo:
    d = os.path.join(tmp_root, "demo")
    p = subprocess.run([msb_bin(), "demo", "--dir", d], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"msb demo failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    ds = os.path.join(d, "dataset.jsonl")
    with open(ds) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return Demo(dir=d, dataset=ds, spec=os.path.join(d, "specs.yaml"), cache=os.path.join(d, "cache"), rows=rows)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A running ``msb serve``."""

    def __init__(self, workdir: str, listen: str, cache: str, spec: str, extra: List[str], token: str = "",
                 ca_file: str = "") -> None:
        self.dir = workdir
        self.listen = listen
        self.token = token
        self.out = os.path.join(workdir, "out")
        os.makedirs(self.out, exist_ok=True)
        argv = [msb_bin(), "serve", "--listen", listen, "--cache", cache, "--spec", spec,
                "--state-dir", os.path.join(workdir, "state"), "--out", self.out] + extra
        env = dict(os.environ)
        if token:
            tf = os.path.join(workdir, "token")
            with open(tf, "w") as f:
                f.write(token + "\n")
            argv += ["--token-file", tf]
        self.log_path = os.path.join(workdir, "serve.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL, env=env)
        scheme = "https" if "--tls-cert" in extra else "http"
        self.address = listen if listen.startswith("unix://") else f"{scheme}://{listen}"
        self.client = msb.Client(self.address, token=token, ca_file=ca_file or None)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"msb serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                self.client.health()
                break
            except msb.MsbError:
                if time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"msb serve did not answer in 60s:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-5000:].decode("utf-8", "replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def _start(tmp_root: str, name: str, demo: Demo, listen: str, token: str = "", extra: List[str] = (),
           ca_file: str = "") -> Daemon:
    d = os.path.join(tmp_root, name)
    os.makedirs(d, exist_ok=True)
    dm = Daemon(d, listen, demo.cache, demo.spec, list(extra), token=token, ca_file=ca_file)
    dm.client.load_dataset(demo.dataset)
    return dm


def _finish(dm: Daemon) -> None:
    left = dm.client.list_sandboxes()
    code = dm.stop()
    assert not left, f"sandboxes left open by the tests: {[s.id for s in left]}"
    assert code == 0, f"msb serve exited {code} on SIGTERM:\n{dm.log()}"
    assert not os.path.exists(dm.listen[len("unix://"):]) if dm.listen.startswith("unix://") else True


@pytest.fixture(scope="session")
def daemon(tmp_root: str, demo: Demo) -> Iterator[Daemon]:
    dm = _start(tmp_root, "unix", demo, "unix://" + os.path.join(tmp_root, "unix", "msb.sock"))
    yield dm
    _finish(dm)


@pytest.fixture(scope="session")
def tcp_daemon(tmp_root: str, demo: Demo) -> Iterator[Daemon]:
    dm = _start(tmp_root, "tcp", demo, f"127.0.0.1:{free_port()}", token="s3cret-" + os.urandom(8).hex())
    yield dm
    _finish(dm)


@pytest.fixture
def client(daemon: Daemon) -> msb.Client:
    return daemon.client


LEAF_EXT = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


@dataclass
class Certs:
    """A throwaway CA and a server certificate it signed (PEM files)."""

    ca: str
    cert: str
    key: str
    other_ca: str


def _openssl(*args: str) -> None:
    p = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"openssl {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-2000:]}")


def _make_ca(d: str, name: str) -> str:
    key, pem = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.pem")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", pem, "-days", "2", "-subj", f"/CN=msb test {name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pem


@pytest.fixture(scope="session")
def certs(tmp_root: str) -> Certs:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests make their certificates with the openssl command: install openssl")
    d = os.path.join(tmp_root, "tls-certs")
    os.makedirs(d, exist_ok=True)
    ca = _make_ca(d, "ca")
    other = _make_ca(d, "other-ca")
    key, csr, cert, ext = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem", "srv.ext"))
    with open(ext, "w") as f:
        f.write(LEAF_EXT)
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", ext)
    return Certs(ca=ca, cert=cert, key=key, other_ca=other)


@pytest.fixture(scope="session")
def tls_daemon(tmp_root: str, demo: Demo, certs: Certs) -> Iterator[Daemon]:
    dm = _start(tmp_root, "tls", demo, f"127.0.0.1:{free_port()}", token="s3cret-" + os.urandom(8).hex(),
                extra=["--tls-cert", certs.cert, "--tls-key", certs.key], ca_file=certs.ca)
    yield dm
    _finish(dm)
