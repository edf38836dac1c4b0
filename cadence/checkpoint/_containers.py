"""The two containers of a checkpoint, written crash-safely and opened without trusting them.

Both hold the same tree: ``manifest.json`` and ``components/<name>/...``.

- ``"directory"``: a folder in the layout of ``write_checkpoint``: the tree goes into a
  fresh ``checkpoint-<id>/`` inside it, and only once complete does the pointer file
  ``LATEST`` name it (replaced atomically); the previous one is then removed.
- ``"archive"``: one zip file (members stored, or deflated): the tree is written into a
  hidden folder beside the destination, zipped into a hidden file, flushed to disk, and
  renamed over the destination (atomic on POSIX).

A process killed at any moment leaves the previous checkpoint or the new one, never a
mix; leftovers of a killed write are removed by the next write to the same path.

Opening checks the manifest before anything else, and each file a component is read
from against its record (size; members of an archive against their zip CRC, read no
further than their recorded size).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from cadence.checkpoint._files import FORMAT, VERSION, seal_manifest
    >>> manifest = seal_manifest({"format": FORMAT, "version": VERSION, "components": {}})
    >>> def write(root):
    ...     _ = (root / "manifest.json").write_bytes(manifest)
    >>> path = Path(tempfile.mkdtemp()) / "run.ckpt"
    >>> write_archive(path, write, "stored")
    >>> with open_checkpoint(path) as reader:
    ...     reader.manifest["components"]
    {}
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from cadence.checkpoint._files import check_record, fsync_dir, fsync_file, unseal_manifest
from cadence.checkpoint.report import CheckpointError
from cadence.data.replay_buffers._checkpoint_files import read_bytes
from cadence.data.replay_buffers.checkpoint import POINTER, latest_checkpoint, write_checkpoint

__all__ = ["MANIFEST", "open_checkpoint", "write_archive", "write_directory"]

MANIFEST = "manifest.json"
_MANIFEST_LIMIT = 64 * 2**20  # a manifest lists files: anything larger is not one of ours
_COMPRESSION = {"stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED}


# ---------------------------------------------------------------------- writing
def write_directory(destination: Path, write: Callable[[Path], None]) -> None:
    """Writes a checkpoint folder at ``destination`` with ``write(tree_root)``, crash-safely.

    Raises:
        CheckpointError: ``destination`` exists and is not a folder.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "ckpt"
        >>> write_directory(path, lambda root: (root / "manifest.json").write_text("{}"))
        >>> sorted(p.name.split("-")[0] for p in path.iterdir())
        ['LATEST', 'checkpoint']
    """
    if destination.exists() and not destination.is_dir():
        raise CheckpointError(
            f"{destination}: is a file (an archive checkpoint?); format 'directory' writes a folder there: "
            f"remove it or save elsewhere."
        )
    existed = destination.is_dir()
    before = set(destination.iterdir()) if existed else set()
    try:
        write_checkpoint(destination, write)
    except BaseException:
        # write_checkpoint leaves a failed tree for its next call to remove: remove this call's now
        for entry in set(destination.iterdir()) - before if destination.is_dir() else ():
            if entry.name.endswith(".partial") and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
        if not existed:
            with contextlib.suppress(OSError):  # only if empty: the folder this call made
                destination.rmdir()
        raise


def write_archive(destination: Path, write: Callable[[Path], None], compression: str) -> None:
    """Writes a one-file checkpoint (a zip) at ``destination`` with ``write(tree_root)``,
    crash-safely.

    Args:
        destination: the file.
        write: fills the folder it is given with the tree.
        compression: ``"stored"`` or ``"deflate"``.

    Raises:
        CheckpointError: ``destination`` is a folder.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "run.ckpt"
        >>> write_archive(path, lambda root: (root / "manifest.json").write_text("{}"), "deflate")
        >>> zipfile.ZipFile(path).namelist()
        ['manifest.json']
    """
    parent = destination.parent
    parent.mkdir(parents=True, exist_ok=True)
    if destination.is_dir():
        raise CheckpointError(
            f"{destination}: is a folder (a checkpoint of format 'directory'?); format 'archive' writes one file "
            f"there: remove it or save elsewhere."
        )
    _remove_leftovers(parent, destination.name)
    token = uuid.uuid4().hex
    stage = parent / f".{destination.name}.{token}.stage"
    partial = parent / f".{destination.name}.{token}.partial"
    stage.mkdir()
    try:
        write(stage)
        with zipfile.ZipFile(partial, "w", compression=_COMPRESSION[compression], allowZip64=True) as archive:
            for file in sorted(stage.rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(stage).as_posix())
        fsync_file(partial)
        os.replace(partial, destination)
        fsync_dir(parent)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        partial.unlink(missing_ok=True)


def _remove_leftovers(parent: Path, name: str) -> None:
    """Removes what a killed write of ``parent / name`` left (its hidden stage and partial file)."""
    pattern = re.compile(re.escape(f".{name}.") + r"[0-9a-f]{32}\.(stage|partial)")
    for entry in parent.iterdir():
        if pattern.fullmatch(entry.name) and not entry.is_symlink():
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


# ---------------------------------------------------------------------- reading
class _Reader(Protocol):
    """An opened checkpoint (a folder or an archive): its manifest, and its components'
    folders on demand."""

    manifest: dict[str, Any]
    source: Path

    def shown(self, name: str, relative: str) -> str:
        """How errors name a component's file."""
        ...

    def folder(self, name: str, files: Mapping[str, Any]) -> Path:
        """The component's folder, its files checked against ``files`` (their records)."""
        ...

    def reword(self, message: str) -> str:
        """``message`` with paths of a temporary copy replaced by what they copy."""
        ...


class _DirectoryReader:
    def __init__(self, source: Path) -> None:
        self.source = source
        if (source / POINTER).is_file():
            try:
                self.root = latest_checkpoint(source)
            except FileNotFoundError as error:
                raise CheckpointError(str(error)) from None
        elif (source / MANIFEST).is_file():
            self.root = source  # one checkpoint-<id> folder, named directly
        else:
            raise CheckpointError(
                f"{source}: holds no Cadence checkpoint (neither {POINTER} nor {MANIFEST} in it)."
            )
        file = self.root / MANIFEST
        self.manifest = unseal_manifest(read_bytes(file, CheckpointError), str(file))

    def shown(self, name: str, relative: str) -> str:
        return str(self.root / "components" / name / relative)

    def folder(self, name: str, files: Mapping[str, Any]) -> Path:
        folder = self.root / "components" / name
        for relative, record in files.items():
            check_record(folder / relative, self.shown(name, relative), record, verify=False)
        return folder

    def reword(self, message: str) -> str:
        return message  # the files are read in place: their paths are the real ones


class _ArchiveReader:
    def __init__(self, source: Path, archive: zipfile.ZipFile, scratch: Path) -> None:
        self.source = source
        self.archive = archive
        self.scratch = scratch
        try:
            info = archive.getinfo(MANIFEST)
        except KeyError:
            raise CheckpointError(f"{source}:{MANIFEST}: missing (not a Cadence checkpoint archive).") from None
        if info.file_size > _MANIFEST_LIMIT:
            raise CheckpointError(f"{source}:{MANIFEST}: {info.file_size} bytes, too large for a manifest (refused).")
        self.manifest = unseal_manifest(self._member_bytes(MANIFEST), f"{source}:{MANIFEST}")

    def _member_bytes(self, member: str) -> bytes:
        try:
            with self.archive.open(member) as handle:
                return handle.read()
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
            raise CheckpointError(f"{self.source}:{member}: damaged ({type(error).__name__}: {error}).") from None

    def shown(self, name: str, relative: str) -> str:
        return f"{self.source}:components/{name}/{relative}"

    def folder(self, name: str, files: Mapping[str, Any]) -> Path:
        folder = self.scratch / "components" / name
        for relative, record in files.items():
            member = f"components/{name}/{relative}"
            shown = self.shown(name, relative)
            try:
                info = self.archive.getinfo(member)
            except KeyError:
                raise CheckpointError(f"{shown}: missing.") from None
            if info.file_size != record["bytes"]:
                raise CheckpointError(f"{shown}: holds {info.file_size} bytes, the manifest says {record['bytes']}.")
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            self._extract(member, target, record["bytes"], shown)
        return folder

    def _extract(self, member: str, target: Path, size: int, shown: str) -> None:
        """Copies ``member`` to ``target``; a member that inflates beyond its recorded
        ``size`` is refused as soon as it does (not written out)."""
        written = 0
        try:
            with self.archive.open(member) as source, open(target, "wb") as sink:
                # to the end: zipfile checks the member's CRC-32 there
                while chunk := source.read(2**24):
                    written += len(chunk)
                    if written > size:
                        raise CheckpointError(f"{shown}: holds more than the {size} bytes its records give (refused).")
                    sink.write(chunk)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
            raise CheckpointError(f"{shown}: damaged ({type(error).__name__}: {error}).") from None
        if written != size:
            raise CheckpointError(f"{shown}: holds {written} bytes, the manifest says {size} (truncated).")

    def reword(self, message: str) -> str:
        return message.replace(f"{self.scratch}/", f"{self.source}:")


@contextmanager
def open_checkpoint(source: Path) -> Iterator[_Reader]:
    """Opens the checkpoint at ``source`` (a folder or an archive) and checks its manifest.

    Raises:
        FileNotFoundError: nothing is at ``source``.
        CheckpointError: ``source`` is no Cadence checkpoint, or its manifest is damaged.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "notes.txt"
        >>> _ = file.write_text("hello")
        >>> with open_checkpoint(file):  # doctest: +ELLIPSIS
        ...     pass
        Traceback (most recent call last):
        ...
        cadence.checkpoint.report.CheckpointError: .../notes.txt: not a readable zip archive (...): truncated, damaged, or not a Cadence checkpoint.
    """
    if source.is_dir():
        yield _DirectoryReader(source)
        return
    if not source.exists():
        raise FileNotFoundError(f"{source}: no checkpoint there (nothing at that path).")
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise CheckpointError(
            f"{source}: not a readable zip archive ({error}): truncated, damaged, or not a Cadence checkpoint."
        ) from None
    scratch = Path(tempfile.mkdtemp(prefix="cadence-checkpoint-"))
    try:
        with archive:
            yield _ArchiveReader(source, archive, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
