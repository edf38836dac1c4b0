"""The files of a checkpoint: data only, sized, checksummed, and named in every error.

A checkpoint may come from someone else, so reading it runs no code:

- the manifest (``manifest.json``) and value components are JSON; the manifest is
  sealed with a CRC-32 of its own content and records every file's size (and the
  CRC-32 of the files written here);
- states (``state.pt``) are ``torch.save`` files of tensors and plain values, read with
  ``torch.load(weights_only=True)``; numpy arrays and TensorDicts inside a state are
  written as tagged tensors and dicts (see ``cadence.data.replay_buffers``) and rebuilt.

Names inside a manifest (components, files) are checked before they become paths: one
or more parts of letters, digits, ``_``, ``.`` and ``-``, none starting with ``.``.

Examples:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> file = Path(tempfile.mkdtemp()) / "state.pt"
    >>> write_state({"step": 3, "w": torch.ones(2)}, file, "component 'x'")
    >>> record = file_record(file, checksum=True)
    >>> read_state(file, str(file), record, None)["w"].tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from cadence.checkpoint.report import CheckpointError
from cadence.data.replay_buffers._checkpoint_files import (
    _Tagged,
    decode_state,
    encode_state,
    file_entry,
    file_size,
    seal_json,
    unseal_json,
    weights_only_reason,
)
from cadence.data.replay_buffers.checkpoint import fsync_dir, fsync_file

__all__ = [
    "FORMAT",
    "VERSION",
    "check_name",
    "check_record",
    "file_record",
    "fsync_dir",
    "fsync_file",
    "read_json",
    "read_state",
    "seal_manifest",
    "to_json",
    "torch_load_error",
    "unseal_manifest",
    "write_json",
    "write_state",
]

FORMAT = "cadence.checkpoint"
VERSION = 1
KINDS = ("state_dict", "generator", "dumps", "json", "data")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


def check_name(name: Any, what: str) -> str:
    """``name`` if it is a safe one-part name (a component's, a file's part), else ``ValueError``.

    Examples:
        >>> check_name("replay_buffer", "a component name")
        'replay_buffer'
        >>> check_name("../x", "a component name")
        Traceback (most recent call last):
        ...
        ValueError: a component name must be letters, digits, '_', '.' and '-' (not starting with '.', at most 128), got '../x'.
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            f"{what} must be letters, digits, '_', '.' and '-' (not starting with '.', at most 128), got {name!r}."
        )
    return name


# ---------------------------------------------------------------------- sizes and checksums
def file_record(file: Path, checksum: bool) -> dict[str, int]:
    """What the manifest records of ``file``: its byte count, and its CRC-32 if ``checksum``.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x"
        >>> _ = file.write_bytes(b"abc")
        >>> file_record(file, checksum=False)
        {'bytes': 3}
    """
    if checksum:
        return file_entry(file)
    return {"bytes": file.stat().st_size}


def check_record(file: Path, shown: str, record: Mapping[str, Any], verify: bool = True) -> None:
    """Raises ``CheckpointError`` (naming ``shown``) unless ``file`` is a plain file of the
    recorded size and, if recorded and ``verify``, CRC-32.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x"
        >>> _ = file.write_bytes(b"ab")
        >>> check_record(file, "ckpt/x", {"bytes": 3})
        Traceback (most recent call last):
        ...
        cadence.checkpoint.report.CheckpointError: ckpt/x: holds 2 bytes, the manifest says 3 (truncated).
    """
    if file.is_symlink():  # a crafted folder could point a payload at any file of the machine
        raise CheckpointError(f"{shown}: is a symbolic link; a checkpoint's files are plain files (refused).")
    size = file_size(file, shown, CheckpointError)
    if not file.is_file():
        raise CheckpointError(f"{shown}: not a file.")
    if size != record["bytes"]:
        hint = " (truncated)" if size < record["bytes"] else ""
        raise CheckpointError(f"{shown}: holds {size} bytes, the manifest says {record['bytes']}{hint}.")
    if verify and "crc32" in record and file_entry(file)["crc32"] != record["crc32"]:
        raise CheckpointError(f"{shown}: its checksum differs from the one recorded when it was written (damaged).")


# ---------------------------------------------------------------------- states (torch.save, weights_only)
def write_state(state: Any, file: Path, where: str) -> None:
    """Writes ``state`` into ``file`` with ``torch.save``, once checked to hold only data.

    Raises:
        TypeError: ``state`` holds something a checkpoint cannot hold without code (its
            place is named, starting with ``where``); nothing is written.

    Examples:
        >>> import tempfile
        >>> write_state({"f": len}, Path(tempfile.mkdtemp()) / "s.pt", "component 'x'")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: component 'x'['f'] is a builtin_function_or_method, which a checkpoint cannot hold ...
    """
    encoded = encode_state(_python_scalars(state), where)
    torch.save(encoded, file)


def _python_scalars(value: Any) -> Any:
    """``value`` with the numpy scalars that subclass Python's (``np.float64``, ``np.str_``,
    ``np.bytes_``, ``np.complex128``) turned into the Python value: ``encode_state`` passes
    them on untagged, and ``torch.load(weights_only=True)`` refuses numpy scalars."""
    if isinstance(value, np.generic):
        return value.item() if isinstance(value, (float, complex, str, bytes)) else value
    if type(value) in (dict, OrderedDict):
        converted = type(value)((key, _python_scalars(item)) for key, item in value.items())
        if getattr(value, "_metadata", None) is not None:  # what a module's state dict carries
            converted._metadata = value._metadata  # type: ignore[attr-defined]
        return converted
    if type(value) in (list, tuple):
        return type(value)(_python_scalars(item) for item in value)
    return value


def _mover(map_location: Any) -> Callable[[Any, str], Any] | None:
    """The ``map_location`` function for ``torch.load``: tensors saved on an accelerator go
    where ``map_location`` says; tensors saved on the CPU stay there."""
    if map_location is None:
        return None  # torch's default: each tensor back on the device it was saved from
    if isinstance(map_location, Mapping):
        table = {str(source): str(torch.device(target)) for source, target in map_location.items()}

        def move_by_table(storage: Any, location: str) -> Any:
            return torch.serialization.default_restore_location(storage, table.get(location, location))

        return move_by_table
    if not isinstance(map_location, (str, torch.device)):
        raise TypeError(
            f"map_location must be None, a device (str or torch.device) or a dict from saved devices to devices, "
            f"got {type(map_location).__name__}."
        )
    target = str(torch.device(map_location))

    def move(storage: Any, location: str) -> Any:
        if location == "cpu":
            return storage
        return torch.serialization.default_restore_location(storage, target)

    return move


def read_state(file: Path, shown: str, record: Mapping[str, Any], map_location: Any) -> Any:
    """What :func:`write_state` wrote into ``file``, read with ``torch.load(weights_only=True)``.

    Args:
        file: the file.
        shown: how errors name it (the archive and member, for an archive).
        record: its manifest record (size, CRC-32).
        map_location: where tensors saved on an accelerator go (see ``Checkpoint.load``).

    Raises:
        CheckpointError: the file is missing, of another size or checksum than recorded,
            or holds anything but data (nothing in it is run).

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "s.pt"
        >>> torch.save({"f": print}, file)  # a pickle that names a function
        >>> read_state(file, "ckpt/s.pt", file_record(file, checksum=True), None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        cadence.checkpoint.report.CheckpointError: ckpt/s.pt: holds more than tensors and plain values (refused, nothing in it was run; ...
    """
    check_record(file, shown, record)
    mover = _mover(map_location)
    try:
        with torch.serialization.safe_globals([_Tagged]):
            state = torch.load(file, map_location=mover, weights_only=True)
    except Exception as error:  # the unpickler refused it, or the file is not a torch file at all
        raise torch_load_error(error, shown) from None
    try:
        return decode_state(state)
    except Exception as error:  # a tag that no Cadence wrote
        raise CheckpointError(f"{shown}: holds a value no Cadence checkpoint holds ({error}).") from None


def torch_load_error(error: Exception, shown: str) -> CheckpointError:
    """The error to raise when ``torch.load(weights_only=True)`` failed on the file ``shown``:
    it names the file and what torch found, without torch's advice to load it anyway.

    Examples:
        >>> import pickle
        >>> error = pickle.UnpicklingError("Weights only load failed.\\nWeightsUnpickler error: Unsupported "
        ...                                "global: GLOBAL os.system was not an allowed global by default.")
        >>> str(torch_load_error(error, "ckpt/state.pt"))
        'ckpt/state.pt: holds more than tensors and plain values (refused, nothing in it was run; Unsupported global: GLOBAL os.system was not an allowed global by default.).'
    """
    reason = weights_only_reason(error)
    if reason.startswith(("Unsupported global", "Trying to load unsupported")):
        return CheckpointError(
            f"{shown}: holds more than tensors and plain values (refused, nothing in it was run; {reason})."
        )
    return CheckpointError(
        f"{shown}: not a torch.save file of tensors and plain values: damaged, or of another kind "
        f"(refused, nothing in it was run; {type(error).__name__}: {reason})."
    )


# ---------------------------------------------------------------------- JSON values
def to_json(value: Any, where: str) -> Any:
    """``value`` as JSON holds it: numbers, strings, booleans, ``None``, lists and dicts
    with string keys (tuples become lists, numpy scalars numbers, paths strings).

    Raises:
        TypeError: something in ``value`` is none of these (its place is named).

    Examples:
        >>> import numpy as np
        >>> to_json({"lr": np.float32(0.5), "sizes": (64, 64)}, "config")
        {'lr': 0.5, 'sizes': [64, 64]}
        >>> to_json({"w": torch.ones(1)}, "metrics")
        Traceback (most recent call last):
        ...
        TypeError: metrics['w'] is a Tensor, which JSON cannot hold.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return to_json(value.item(), where)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        converted = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r}, a {type(key).__name__}: JSON keys are strings.")
            converted[key] = to_json(item, f"{where}[{key!r}]")
        return converted
    if isinstance(value, (list, tuple)):
        return [to_json(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{where} is a {type(value).__name__}, which JSON cannot hold.")


def write_json(value: Any, file: Path) -> None:
    """Writes ``value`` (as :func:`to_json` made it) into ``file``."""
    file.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_json(file: Path, shown: str, record: Mapping[str, Any]) -> Any:
    """The JSON value in ``file``, checked against its manifest record.

    Raises:
        CheckpointError: the file is missing, of another size or checksum, or not JSON.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "value.json"
        >>> write_json({"frames": 10}, file)
        >>> read_json(file, "ckpt/value.json", file_record(file, checksum=True))
        {'frames': 10}
    """
    check_record(file, shown, record)
    data = file.read_bytes()
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{shown}: not valid JSON ({len(data)} bytes; {error}).") from None


# ---------------------------------------------------------------------- the manifest
def seal_manifest(body: dict[str, Any]) -> bytes:
    """The manifest's bytes: ``body`` as JSON, with a CRC-32 of it under ``"crc32"``.

    Examples:
        >>> body = {"format": FORMAT, "version": VERSION, "components": {}}
        >>> unseal_manifest(seal_manifest(body), "ckpt/manifest.json")["components"]
        {}
    """
    return seal_json(body)


def unseal_manifest(data: bytes, shown: str) -> dict[str, Any]:
    """The manifest in ``data``, checked: sealed, of this format and version, its component
    and file names safe, each file's record well formed.

    Raises:
        CheckpointError: naming ``shown`` and what is wrong.

    Examples:
        >>> unseal_manifest(b'{"format": "torchrl.checkpoint"}', "ckpt/manifest.json")
        Traceback (most recent call last):
        ...
        cadence.checkpoint.report.CheckpointError: ckpt/manifest.json: has no 'crc32' field: not written by a Cadence checkpoint.
    """
    body = unseal_json(data, shown, "a Cadence checkpoint", error=CheckpointError)
    if body.get("format") != FORMAT:
        raise CheckpointError(f"{shown}: its format is {body.get('format')!r}, expected {FORMAT!r}.")
    version = body.get("version")
    if version != VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
        raise CheckpointError(
            f"{shown}: format version {version!r}; this Cadence reads version {VERSION}"
            f"{' (written by a newer Cadence)' if newer else ''}."
        )
    components = body.get("components")
    if not isinstance(components, dict):
        raise CheckpointError(f"{shown}: field 'components' should be an object, holds {components!r}.")
    for name, record in components.items():
        _check_component_record(name, record, shown)
    return body


def _check_component_record(name: Any, record: Any, shown: str) -> None:
    try:
        check_name(name, "a component name")
    except ValueError as error:
        raise CheckpointError(f"{shown}: {error}") from None
    if not isinstance(record, dict) or record.get("kind") not in KINDS or not isinstance(record.get("files"), dict):
        raise CheckpointError(
            f"{shown}: component {name!r} should be an object with a 'kind' among {list(KINDS)} and 'files', "
            f"holds {record!r}."
        )
    for relative, entry in record["files"].items():
        parts = relative.split("/") if isinstance(relative, str) else [relative]
        try:
            for part in parts:
                check_name(part, "a file name")
        except ValueError as error:
            raise CheckpointError(f"{shown}: component {name!r} lists the file {relative!r}: {error}") from None
        numbers_ok = isinstance(entry, dict) and all(
            isinstance(entry.get(key), int) and not isinstance(entry.get(key), bool) and entry[key] >= 0
            for key in ("bytes", *(("crc32",) if "crc32" in entry else ()))
        )
        if not numbers_ok:
            raise CheckpointError(
                f"{shown}: the record of {name}/{relative} should hold a non-negative 'bytes' (and 'crc32'), "
                f"holds {entry!r}."
            )
