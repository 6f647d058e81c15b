"""The sidecar file by which a writing process advertises where it serves its record.

``<db>.reader.json`` next to the database: the writer's pid, the 127.0.0.1 port it answers
reads on and a random token every request must carry. Created with mode 0600 (only the
user who writes the record can read the token), replaced atomically, removed when the
writer closes the record. A sidecar left by a killed writer names a dead process and is
ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Writer", "live_writer", "publish", "sidecar_path", "withdraw"]


@dataclass(frozen=True)
class Writer:
    """A live process writing a record, and where it answers reads."""

    pid: int
    port: int
    token: str = field(repr=False)


def sidecar_path(db: Path) -> Path:
    """``<db>.reader.json``."""
    return db.with_name(db.name + ".reader.json")


def publish(db: Path, writer: Writer) -> None:
    """Advertise ``writer`` for ``db`` (0600, atomically)."""
    final = sidecar_path(db)
    temporary = final.with_name(f"{final.name}.{writer.pid}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"db": str(db), "pid": writer.pid, "port": writer.port, "token": writer.token}, f)
    os.replace(temporary, final)


def withdraw(db: Path, writer: Writer) -> None:
    """Remove the advertisement of ``writer`` (not one a later writer made)."""
    if _read(db) == writer:
        sidecar_path(db).unlink(missing_ok=True)


def live_writer(db: Path) -> Writer | None:
    """The writer advertised for ``db`` if its process is alive."""
    writer = _read(db)
    return writer if writer is not None and _alive(writer.pid) else None


def _read(db: Path) -> Writer | None:
    try:
        found = json.loads(sidecar_path(db).read_text(encoding="utf-8"))
        if found["db"] != str(db):
            return None
        writer = Writer(pid=found["pid"], port=found["port"], token=found["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    fields_ok = (
        isinstance(writer.pid, int)
        and writer.pid > 0
        and isinstance(writer.port, int)
        and isinstance(writer.token, str)
        and 0 < writer.port < 65536
    )
    return writer if fields_ok else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
