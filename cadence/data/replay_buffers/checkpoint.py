"""Crash-safe checkpoint directories: write aside, then switch atomically.

``write_checkpoint(path, write)`` has ``write`` fill a fresh directory inside ``path``;
only once it is complete does a small pointer file (``LATEST``) name it, replaced with
``os.replace`` (atomic on POSIX). A process killed at any moment therefore leaves
``LATEST`` naming either the previous complete checkpoint or the new one, never a
half-written one; leftovers of an interrupted write are removed by the next one.

``LATEST`` lists the kept checkpoints, newest first (``keep`` of them): a reader that
finds the newest one damaged (a disk that lost its tail, a file replaced by hand) can
fall back to the one before it (:func:`checkpoint_history`).

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

__all__ = ["CheckpointError", "checkpoint_history", "latest_checkpoint", "write_checkpoint"]

POINTER = "LATEST"
_PREFIX = "checkpoint-"


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, altered, or does not fit what loads it.

    The message names the file and what is wrong with it.

    Examples:
        >>> raise CheckpointError("/tmp/run/state.pt: truncated (read 10 of 100 bytes)")
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: /tmp/run/state.pt: truncated (read 10 of 100 bytes)
    """


def write_checkpoint(path: str | Path, write: Callable[[Path], object], keep: int = 1) -> Path:
    """Writes a checkpoint into the directory ``path`` with ``write(directory)``.

    Args:
        path: the checkpoint directory (created if missing).
        write: fills the directory it is given.
        keep: how many complete checkpoints stay on disk, the new one included (``2``
            keeps the one before it to fall back to).

    Returns:
        The directory of the new checkpoint.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> write_checkpoint(root, lambda d: (d / "a").write_text("1")).name.startswith("checkpoint-")
        True
    """
    if keep < 1:
        raise ValueError(f"write_checkpoint: keep must be at least 1, got {keep}.")
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{_PREFIX}{uuid.uuid4().hex}"
    partial = root / f"{name}.partial"
    partial.mkdir()
    write(partial)
    _sync_tree(partial)
    final = root / name
    os.rename(partial, final)
    kept = [name] + [previous.name for previous in checkpoint_history(root)][: keep - 1]
    pointer = root / f"{POINTER}.{uuid.uuid4().hex}.tmp"
    with open(pointer, "w") as file:
        file.write("\n".join(kept) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(pointer, root / POINTER)
    fsync_dir(root)
    for stale in root.iterdir():  # older checkpoints and leftovers of interrupted writes
        if stale.name not in kept and stale.name != POINTER and stale.name.startswith((_PREFIX, f"{POINTER}.")):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
    return final


def checkpoint_history(path: str | Path) -> list[Path]:
    """The directories of the complete checkpoints kept in ``path``, newest first (empty
    if there is none).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> first = write_checkpoint(root, lambda d: None, keep=2)
        >>> second = write_checkpoint(root, lambda d: None, keep=2)
        >>> checkpoint_history(root) == [second, first]
        True
    """
    root = Path(path)
    try:
        names = (root / POINTER).read_text().split()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return []
    # a name is one of ours, not a path: a pointer edited to "../../elsewhere" names nothing
    return [root / name for name in names if _is_checkpoint_name(name) and (root / name).is_dir()]


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
    history = checkpoint_history(root)
    if not history:
        try:
            named = pointer.read_text().split()
        except UnicodeDecodeError:
            named = []
        raise FileNotFoundError(
            f"{pointer} names no checkpoint directory of {root} that exists (it names {named[:1] or 'nothing'})."
        )
    return history[0]


def _is_checkpoint_name(name: str) -> bool:
    return name.startswith(_PREFIX) and all(char in "0123456789abcdef" for char in name[len(_PREFIX):])


def _sync_tree(directory: Path) -> None:
    """Flushes the files written to disk, so that the rename publishes complete data."""
    for file in directory.rglob("*"):
        if file.is_file():
            fsync_file(file)
    fsync_dir(directory)


def fsync_file(file: Path) -> None:
    """Flushes ``file`` to disk (before a rename publishes it).

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "data.bin"
        >>> _ = file.write_bytes(b"x")
        >>> fsync_file(file), fsync_dir(file.parent)
        (None, None)
    """
    with open(file, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(directory: Path) -> None:
    """Flushes ``directory``'s entries to disk (after a rename in it); see :func:`fsync_file`."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
