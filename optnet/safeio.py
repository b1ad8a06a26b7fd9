"""Every byte optnet reads from a user's path or writes to one goes through here.

Reading (:func:`read_bytes`, :func:`read_json`): the path must name a regular file (a FIFO, a
device, a socket or a folder is refused at once, before anything blocks on it), at most
``MAX_FILE_BYTES`` long, UTF-8 for text; JSON must be strict (no ``NaN``/``Infinity``, no
duplicate keys). Every failure is an :class:`~optnet.errors.InputError` naming the path.

Writing (:func:`write_atomic`, :func:`prepare_output`, :func:`output_dir`) follows Git's
lockfile discipline: the text goes to a temporary file beside the target, is flushed and
fsynced, then renamed over it. Only a regular file or a new path is ever replaced; a device,
FIFO, socket or folder is refused even with ``--force``, and an existing file is replaced only
with ``--force``. Unwritable folders and full disks are input errors naming the path. While a
temporary file exists it is registered here, so that a second Ctrl-C, which exits at once
(``optnet.interrupt``), removes it: no partial file is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from optnet.errors import OptnetError, input_error

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest file optnet reads (instances, results, measurements, sweep stores)."""

_temporaries: set[str] = set()
"""Temporary files being written now (removed by ``remove_temporaries`` on a hard exit)."""


def os_reason(exc: BaseException) -> str:
    """The operating system's words for ``exc`` ("Permission denied"), else its text."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# ------------------------------------------------------------------------------------------
# reading


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_bytes(path: str | Path, what: str = "file", name: str | None = None) -> bytes:
    """The bytes of the regular file ``path``; anything else is an InputError at once.

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a FIFO
    swapped in after a check cannot hang the read."""
    name = str(path) if name is None else name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise input_error(name, "", "file not found") from None
    except NotADirectoryError:
        raise input_error(name, "", "file not found (a parent of it is not a folder)") from None
    except IsADirectoryError:
        raise input_error(name, "", f"is a folder, expected {what}") from None
    except (OSError, ValueError) as exc:
        raise input_error(name, "", f"cannot read: {os_reason(exc)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise input_error(name, "", f"is a folder, expected {what}")
        if not stat.S_ISREG(st.st_mode):
            raise input_error(
                name, "", f"is {_kind(st.st_mode)}, not a regular file; expected {what}"
            )
        if st.st_size > MAX_FILE_BYTES:
            raise input_error(
                name, "", f"file has {st.st_size} bytes; at most {MAX_FILE_BYTES} allowed"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise input_error(name, "", f"cannot read: {os_reason(exc)}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        raise input_error(name, "", f"file is larger than {MAX_FILE_BYTES} bytes")
    return raw


def read_text(path: str | Path, what: str = "a text file", name: str | None = None) -> str:
    """UTF-8 text of a regular file (a leading byte-order mark is dropped)."""
    name = str(path) if name is None else name
    raw = read_bytes(path, what, name)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise input_error(
            name, "", f"not UTF-8 text: byte {raw[exc.start]:#04x} at offset {exc.start}"
        ) from None


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed (JSON has no NaN or infinity)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_json(text: str, name: str) -> Any:
    """Strict JSON: no NaN/Infinity, no duplicate keys; errors name line and column."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise input_error(
            name, "", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise input_error(name, "", f"not valid JSON: {reason}") from None


def read_json(path: str | Path, what: str = "a JSON file") -> Any:
    """A strict JSON document from a regular file."""
    return parse_json(read_text(path, what), str(path))


# ------------------------------------------------------------------------------------------
# writing


def prepare_output(path: str | Path, force: bool) -> Path:
    """Check that ``path`` may be written: new, or a regular file and ``force``.

    Called before a long solve, so that a bad target fails in milliseconds, and again by
    :func:`write_atomic` just before the rename."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise input_error(str(path), "", "cannot write: a parent of it is not a folder") from None
    except OSError as exc:
        raise input_error(str(path), "", f"cannot write: {os_reason(exc)}") from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise input_error(
                str(path),
                "",
                f"is {_kind(st.st_mode)}; optnet writes only new paths or regular files "
                "(not even with --force)",
            )
        if not force:
            raise OptnetError(f"{path}: exists; pass --force to overwrite")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise input_error(str(path), "", f"cannot write: {parent} is not a folder")
    return path


def output_dir(path: str | Path) -> Path:
    """Create the output folder ``path`` (and its parents); errors name it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise input_error(str(path), "", "is not a folder; give a folder for the output")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise input_error(str(path), "", f"cannot create the folder: {os_reason(exc)}") from None
    return path


def write_atomic(path: str | Path, text: str | bytes, force: bool = False) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename; never overwrite without
    ``force``, never replace anything but a regular file."""
    path = prepare_output(path, force)
    data = text.encode("utf-8") if isinstance(text, str) else text
    output_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise input_error(str(path), "", f"cannot write: {os_reason(exc)}") from None
    _temporaries.add(tmp)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it (mkstemp makes it 0600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        prepare_output(path, force)  # nothing was swapped in meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        reason = "the disk is full" if full else os_reason(exc)
        raise input_error(str(path), "", f"cannot write: {reason}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        _temporaries.discard(tmp)


def remove_temporaries() -> None:
    """Delete every temporary file being written (before a hard exit)."""
    for tmp in list(_temporaries):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _temporaries.discard(tmp)
