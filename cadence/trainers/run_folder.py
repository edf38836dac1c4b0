"""Run folders of ``cadence train``: how one is made, recognised, replaced, and the key
that signs its simulator snapshots.

A run folder holds a marker file, ``cadence-run.json``, written when the folder is made:
it says "this is a Cadence run" and carries the run's id. Only a folder with the marker
is a run: ``--resume`` and ``cadence eval`` take nothing else, and ``--overwrite``
removes nothing else (never a folder that merely happens to have the run's name, nor a
symbolic link).

Most of a checkpoint is data that loads without running code (``torch.load`` with
``weights_only=True``). Simulator snapshots are pickles (a Python env is saved whole),
and unpickling runs code: each snapshot is signed (HMAC-SHA256) with a key made for the
run when its folder is made, and kept outside the run folder, under
:func:`key_directory`. A snapshot is unpickled only when its signature checks out with
that key, so a run folder handed over by someone else, or altered, never runs a
snapshot's code: its resumed run starts new episodes instead. A key is bound to the
folder it was made for (:func:`key_directory` records that folder beside the key), and
``--overwrite`` removes it only with that folder: a folder whose marker names another
run's id (a copy, or a crafted marker) takes nobody's key with it.

A folder someone else made may hold symbolic links (``metrics.csv`` pointing at a file of
yours, ``checkpoints/`` at another run's), hard links or named pipes: writing through them
would change files outside the run, or hang. :func:`unsafe_entries` finds them, and a run
folder holding any is refused before anything is written.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp()) / "demo"
    >>> run_id = create_run_folder(folder)
    >>> is_run_folder(folder), read_run_id(folder) == run_id
    (True, True)
    >>> is_run_folder(folder.parent)
    False
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import uuid
from pathlib import Path

__all__ = [
    "MARKER",
    "create_run_folder",
    "is_run_folder",
    "key_directory",
    "read_run_id",
    "remove_run_folder",
    "run_key",
    "sign",
    "signature_matches",
    "unsafe_entries",
]

MARKER = "cadence-run.json"
_RUN_ID = re.compile(r"[0-9a-f]{32}")
# beside each key, the folder it was made for: the key goes only with that folder
_FOLDER_RECORD = ".folder"


def key_directory() -> Path:
    """Where run keys are kept: ``$CADENCE_KEY_DIR`` if set, else
    ``$XDG_DATA_HOME/cadence/run-keys`` (``~/.local/share/cadence/run-keys``).

    Examples:
        >>> import os
        >>> saved = os.environ.pop("CADENCE_KEY_DIR", None)
        >>> key_directory().name
        'run-keys'
        >>> if saved is not None:
        ...     os.environ["CADENCE_KEY_DIR"] = saved
    """
    configured = os.environ.get("CADENCE_KEY_DIR")
    if configured:
        return Path(configured)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "cadence" / "run-keys"


def create_run_folder(folder: Path) -> str:
    """Makes ``folder`` (its parents too) with its marker and ``checkpoints/``, and the
    run's signing key under :func:`key_directory`.

    Returns:
        The run's id.

    Raises:
        FileExistsError: if ``folder`` exists.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> len(create_run_folder(Path(tempfile.mkdtemp()) / "run"))
        32
    """
    run_id = uuid.uuid4().hex
    keys = key_directory()
    keys.mkdir(mode=0o700, parents=True, exist_ok=True)
    # the key exists before the folder says it is a run: a folder never names a key that was not made
    descriptor = os.open(keys / f"{run_id}.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(secrets.token_bytes(32))
    folder.mkdir(parents=True)
    (keys / f"{run_id}{_FOLDER_RECORD}").write_text(str(folder.resolve()))
    (folder / "checkpoints").mkdir()
    (folder / MARKER).write_text(json.dumps({"cadence_run": 1, "run_id": run_id}) + "\n")
    return run_id


def read_run_id(folder: Path) -> str | None:
    """The run id in the marker of ``folder``; ``None`` if it has no valid marker.

    Examples:
        >>> import tempfile
        >>> read_run_id(Path(tempfile.mkdtemp())) is None
        True
    """
    marker = Path(folder) / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        content = json.loads(marker.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    run_id = content.get("run_id") if isinstance(content, dict) else None
    # the id names a key file: only our own format, never a path
    return run_id if isinstance(run_id, str) and _RUN_ID.fullmatch(run_id) else None


def is_run_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a run folder of ``cadence train``: a real folder (not a
    symbolic link) holding a valid ``cadence-run.json``.

    Examples:
        >>> import tempfile
        >>> is_run_folder(tempfile.mkdtemp())
        False
    """
    path = Path(path)
    return path.is_dir() and not path.is_symlink() and read_run_id(path) is not None


def remove_run_folder(folder: Path) -> None:
    """Removes the run folder ``folder`` (for ``--overwrite``), and its key if the key was
    made for this folder (a copied folder, or one whose marker names another run's id,
    leaves that run's key where it is).

    Raises:
        PermissionError: if ``folder`` is not a run folder (no marker, or a symbolic link):
            nothing is removed.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> remove_run_folder(Path(tempfile.mkdtemp()))
        Traceback (most recent call last):
        ...
        PermissionError: ... is not a run folder of cadence train (no cadence-run.json in it): not removing it
    """
    if not is_run_folder(folder):
        kind = "a symbolic link" if folder.is_symlink() else f"not a run folder of cadence train (no {MARKER} in it)"
        raise PermissionError(f"{folder} is {kind}: not removing it")
    run_id = read_run_id(folder)
    made_for = key_directory() / f"{run_id}{_FOLDER_RECORD}"
    try:
        owns_key = made_for.read_text() == str(folder.resolve())
    except OSError:  # no record (a folder made elsewhere): the key, if any, is not this folder's
        owns_key = False
    shutil.rmtree(folder)  # a marked run folder: everything in it is the run's (rmtree never follows links)
    if owns_key:
        (key_directory() / f"{run_id}.key").unlink(missing_ok=True)
        made_for.unlink(missing_ok=True)


def unsafe_entries(folder: Path) -> list[Path]:
    """What inside ``folder`` writing could follow out of it: symbolic links, files with
    other hard links, and anything that is neither a plain file nor a folder (a named pipe
    would hang a write). Links are listed, never followed.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "metrics.csv").symlink_to(Path.home() / ".bashrc")
        >>> [path.name for path in unsafe_entries(folder)]
        ['metrics.csv']
    """
    found = []
    for root, folders, files in os.walk(folder):  # os.walk does not descend into linked folders
        for name in sorted(folders) + sorted(files):
            path = Path(root) / name
            info = path.lstat()
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                found.append(path)
    return found


def run_key(folder: Path) -> bytes | None:
    """The signing key of the run in ``folder``; ``None`` if this machine holds none
    (the run was made elsewhere, by another user, or its marker was altered).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp()) / "run"
        >>> _ = create_run_folder(folder)
        >>> len(run_key(folder))
        32
    """
    run_id = read_run_id(folder)
    if run_id is None:
        return None
    try:
        key = (key_directory() / f"{run_id}.key").read_bytes()
    except OSError:
        return None
    return key if len(key) == 32 else None


def sign(data: bytes, key: bytes) -> str:
    """The HMAC-SHA256 of ``data`` under ``key``, in hex.

    Examples:
        >>> len(sign(b"snapshot", b"k" * 32))
        64
    """
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def signature_matches(data: bytes, signature: object, key: bytes | None) -> bool:
    """Whether ``signature`` is the signature of ``data`` under ``key`` (False without a key).

    Examples:
        >>> key = b"k" * 32
        >>> signature_matches(b"x", sign(b"x", key), key), signature_matches(b"y", sign(b"x", key), key)
        (True, False)
    """
    if key is None or not isinstance(signature, str):
        return False
    return hmac.compare_digest(sign(data, key), signature)
