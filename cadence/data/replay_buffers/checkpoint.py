"""Crash-safe checkpoint directories: write aside, then switch atomically.

``write_checkpoint(path, write)`` has ``write`` fill a fresh directory inside ``path``;
only once it is complete does a small pointer file (``LATEST``) name it, replaced with
``os.replace`` (atomic on POSIX). A process killed at any moment therefore leaves
``LATEST`` naming either the previous complete checkpoint or the new one, never a
half-written one; leftovers of an interrupted write are removed by the next one.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = write_checkpoint(root, lambda d: (d / "x.txt").write_text("first"))
    >>> _ = write_checkpoint(root, lambda d: (d / "x.txt").write_text("second"))
    >>> (latest_checkpoint(root) / "x.txt").read_text()
    'second'
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["latest_checkpoint", "write_checkpoint"]

POINTER = "LATEST"
_PREFIX = "checkpoint-"


def write_checkpoint(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Writes a checkpoint into the directory ``path`` with ``write(directory)``.

    Args:
        path: the checkpoint directory (created if missing).
        write: fills the directory it is given.

    Returns:
        The directory of the new checkpoint.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> write_checkpoint(root, lambda d: (d / "a").write_text("1")).name.startswith("checkpoint-")
        True
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{_PREFIX}{uuid.uuid4().hex}"
    partial = root / f"{name}.partial"
    partial.mkdir()
    write(partial)
    _sync_tree(partial)
    final = root / name
    os.rename(partial, final)
    pointer = root / f"{POINTER}.{uuid.uuid4().hex}.tmp"
    with open(pointer, "w") as file:
        file.write(name)
        file.flush()
        os.fsync(file.fileno())
    os.replace(pointer, root / POINTER)
    _sync_dir(root)
    for stale in root.iterdir():  # earlier checkpoints and leftovers of interrupted writes
        if stale.name != name and stale.name != POINTER and stale.name.startswith((_PREFIX, f"{POINTER}.")):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
    return final


def latest_checkpoint(path: str | Path) -> Path:
    """The directory of the last complete checkpoint in ``path``.

    Raises:
        FileNotFoundError: ``path`` holds no complete checkpoint.

    Examples:
        >>> import tempfile
        >>> latest_checkpoint(tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        FileNotFoundError: ... holds no complete checkpoint (no LATEST file): was dumps() called on it?
    """
    root = Path(path)
    pointer = root / POINTER
    if not pointer.is_file():
        raise FileNotFoundError(f"{root} holds no complete checkpoint (no {POINTER} file): was dumps() called on it?")
    directory = root / pointer.read_text().strip()
    if not directory.is_dir():
        raise FileNotFoundError(f"{root}/{POINTER} names {directory.name}, which is missing.")
    return directory


def _sync_tree(directory: Path) -> None:
    """Flushes the files written to disk, so that the rename publishes complete data."""
    for file in directory.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
    _sync_dir(directory)


def _sync_dir(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
