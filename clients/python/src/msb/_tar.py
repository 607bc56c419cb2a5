"""Directories to and from tar, for the daemon's files/tar routes."""

from __future__ import annotations

import io
import os
import tarfile


def pack(local: str, arcname: str = "") -> bytes:
    """A tar of local (a file or a directory's contents, under arcname)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        if os.path.isdir(local):
            for entry in sorted(os.listdir(local)):
                tf.add(os.path.join(local, entry), arcname=os.path.join(arcname, entry) if arcname else entry)
        else:
            tf.add(local, arcname=arcname or os.path.basename(local))
    return buf.getvalue()


def unpack(data: bytes, dest: str, strip: int = 0) -> None:
    """Extract a tar into dest, less the first ``strip`` components of each
    name (the daemon packs a directory under its own name), refusing members
    that would leave dest (absolute paths, ``..``, links pointing out) and
    special files."""
    root = os.path.realpath(dest)
    os.makedirs(root, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
        members = []
        for m in tf.getmembers():
            parts = [p for p in m.name.split("/") if p not in ("", ".")][strip:]
            if not parts:
                continue
            m.name = "/".join(parts)
            target = os.path.realpath(os.path.join(root, m.name))
            if target != root and not target.startswith(root + os.sep):
                raise ValueError(f"tar member {m.name!r} would leave {dest}")
            if m.issym() or m.islnk():
                base = os.path.dirname(target) if m.issym() else root
                link = os.path.realpath(os.path.join(base, m.linkname))
                if link != root and not link.startswith(root + os.sep):
                    raise ValueError(f"tar member {m.name!r} links outside {dest}: {m.linkname!r}")
            elif not (m.isfile() or m.isdir()):
                continue
            m.mode &= 0o777
            members.append(m)
        if hasattr(tarfile, "data_filter"):  # checked above; silences 3.12+'s warning
            tf.extractall(root, members=members, filter="fully_trusted")
        else:
            tf.extractall(root, members=members)
