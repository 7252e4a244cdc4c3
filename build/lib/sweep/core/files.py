"""Files specsweep writes: whole or not at all (a temp file renamed into place), and a full disk said in one line."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from sweep.core.errors import UserError


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder, so no reader ever sees half a file.
    An OSError (a full disk, a read-only folder) becomes a UserError naming the file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise write_error(path, exc.strerror or str(exc)) from None


def write_error(path: Path | str, reason: str) -> UserError:
    """The one line for a file that could not be written (a full disk, a read-only folder): `reason` says why."""
    return UserError(
        f"cannot write {path}: {reason}",
        "free space on that disk (or fix its permissions), then run the same command again: finished trials are "
        "kept in the study",
    )


def read_text(path: Path, what: str, fix: str) -> str:
    """A text file the user wrote, or a one-line refusal when it is not UTF-8 text (or cannot be read)."""
    return decode_text(read_bytes(path, what), path, what, fix)


def read_bytes(path: Path, what: str = "workload file") -> bytes:
    """A file's bytes, or a one-line refusal when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"{what} {path} cannot be read ({exc.strerror})", "check the path and its permissions"
        ) from None


def decode_text(data: bytes, path: Path, what: str, fix: str) -> str:
    """The bytes of a file the user wrote as text, or a one-line refusal when they are not UTF-8 text."""
    if b"\0" in data:
        raise UserError(f"{what} {path} is a binary file, not text", fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {exc.start})", fix) from None
