"""Sandboxes on an imported image (``create_sandbox(image=...)``, sync and
asyncio): a docker-archive of the host's bash and its libraries is made
here, imported into the demo's cache with ``msb cache import-image``, and
the daemon runs a raw sandbox on it alone, with the image's Env and
WorkingDir; an image the cache lacks is NotFound."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile

import pytest

import msb
import msb.aio

from conftest import msb_bin

REF = "example.com/pytest/bash:1"


def _layer(files: dict) -> bytes:
    """An uncompressed layer tar: paths to bytes (None: a directory)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name in sorted(files):
            ti = tarfile.TarInfo(name)
            body = files[name]
            if body is None:
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(ti)
            else:
                ti.size, ti.mode = len(body), 0o755
                tf.addfile(ti, io.BytesIO(body))
    return buf.getvalue()


def _bash_files() -> dict:
    """The host's bash and the libraries ldd names, at ldd's paths."""
    out = subprocess.run(["ldd", "/bin/bash"], capture_output=True, text=True, check=True).stdout
    files: dict = {}
    for path in ["/bin/bash"] + re.findall(r"(/\S+) \(0x", out):
        rel = path.lstrip("/")
        parts = rel.split("/")
        for i in range(1, len(parts)):
            files["/".join(parts[:i])] = None
        with open(path, "rb") as f:
            files[rel] = f.read()
    return files


def _docker_archive(path: str) -> None:
    """A docker-save archive of REF: bash, then /etc/marker and /work."""
    layers = [_layer(_bash_files()), _layer({"etc": None, "etc/marker": b"from the image", "work": None})]
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": ["PATH=/bin", "IMG_VAR=from-image"], "WorkingDir": "/work"},
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(b).hexdigest() for b in layers]}}
    cfg = json.dumps(config).encode()
    with tarfile.open(path, "w") as tf:
        def add(name: str, data: bytes) -> None:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        add("config.json", cfg)
        for i, b in enumerate(layers):
            add(f"layer{i}.tar", b)
        add("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [REF],
                                          "Layers": [f"layer{i}.tar" for i in range(len(layers))]}]).encode())


@pytest.fixture(scope="module")
def image(tmp_root, demo) -> str:
    archive = os.path.join(tmp_root, "bash-image.tar")
    _docker_archive(archive)
    p = subprocess.run([msb_bin(), "--cache", demo.cache, "cache", "import-image", "docker-archive:" + archive],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return REF


PROBE = 'echo "$PWD|$IMG_VAR|$(< /etc/marker)"; [ -e /usr/bin/apt ] && echo host'


def test_create_on_image(client, image):
    sb = client.create_sandbox(image=image, env={"IMG_VAR": "given"})
    try:
        assert sb.exec(PROBE).stdout == "/work|given|from the image\n"
    finally:
        sb.close()
    with pytest.raises(msb.NotFound, match="example.com/pytest/nosuch:1"):
        client.create_sandbox(image="example.com/pytest/nosuch:1")


async def test_async_create_on_image(daemon, image):
    async with msb.aio.Client(daemon.address) as c:
        sb = await c.create_sandbox(image=image)
        try:
            assert (await sb.exec(PROBE)).stdout == "/work|from-image|from the image\n"
        finally:
            await sb.close()
        with pytest.raises(msb.NotFound):
            await c.create_sandbox(image="example.com/pytest/nosuch:1")
