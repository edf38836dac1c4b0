"""The files of a replay-buffer checkpoint: data only, sized and checksummed.

A checkpoint may come from someone else, so nothing in it is code:

- metadata is JSON (``*.json``), sealed with a CRC-32 of its own content;
- tensors of a storage are raw bytes (``*.bin``), described by the metadata (dtype,
  shape, byte count, CRC-32) and memory-mapped when read;
- other state (samplers' priorities and generators, writers' cursors, transforms'
  buffers, a ``ListStorage``'s items) is a ``torch.save`` file (``*.pt``) read with
  ``torch.load(weights_only=True)``: tensors, numbers, strings, bytes, ``None`` and
  lists, tuples, sets and dicts of them. Numpy arrays and scalars and ``TensorDict``
  objects are written as tagged tensors and dicts (:func:`encode_state`) and rebuilt
  on reading; anything else is refused when the checkpoint is written.

Every problem found on reading raises ``CheckpointError`` naming the file. The checksums
detect damage (a truncated or bit-flipped file, a hand edit), not a forger, who can
recompute them; safety against a forger comes from the files holding no code.

Examples:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> entry = save_state({"step": 3, "values": torch.arange(3)}, folder / "state.pt")
    >>> load_state(folder / "state.pt", entry)["values"].tolist()
    [0, 1, 2]
    >>> _ = (folder / "state.pt").write_bytes(b"not a state file")
    >>> load_state(folder / "state.pt", entry)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    cadence.data.replay_buffers.checkpoint.CheckpointError: .../state.pt: holds 16 bytes, its metadata says ...
"""

from __future__ import annotations

import collections
import json
import math
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data.replay_buffers.checkpoint import CheckpointError

__all__ = [
    "VERSION",
    "decode_state",
    "dtype_from_name",
    "dtype_name",
    "encode_state",
    "field",
    "file_size",
    "file_entry",
    "load_state",
    "map_raw",
    "read_bytes",
    "read_meta",
    "save_state",
    "shape_field",
    "seal_json",
    "unseal_json",
    "write_meta",
    "weights_only_reason",
    "write_raw",
]

VERSION = 1
_CHUNK = 64 * 2**20  # bytes hashed or written at a time: large, yet cache- and memory-friendly

# every dtype torch names, by its short name ("float32"), for the metadata
_DTYPES: dict[str, torch.dtype] = {
    str(value).removeprefix("torch."): value for value in vars(torch).values() if isinstance(value, torch.dtype)
}


def dtype_name(dtype: torch.dtype) -> str:
    """The short name of ``dtype`` written in metadata.

    Examples:
        >>> dtype_name(torch.float32)
        'float32'
    """
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: Any, file: Path) -> torch.dtype:
    """The dtype that metadata names (from a table, never by looking the name up in torch).

    Raises:
        CheckpointError: ``name`` is no torch dtype.

    Examples:
        >>> dtype_from_name("int64", Path("meta.json"))
        torch.int64
    """
    if not isinstance(name, str) or name not in _DTYPES:
        raise CheckpointError(f"{file}: {name!r} is not a torch dtype.")
    return _DTYPES[name]


# ---------------------------------------------------------------------- metadata (JSON)
def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def seal_json(body: dict[str, Any]) -> bytes:
    """``body`` as JSON bytes, with a CRC-32 of it under ``"crc32"`` (what :func:`unseal_json` checks).

    Examples:
        >>> unseal_json(seal_json({"rows": 3}), "meta.json", "dumps()")
        {'rows': 3}
    """
    sealed = {**body, "crc32": zlib.crc32(_canonical(body))}
    return (json.dumps(sealed, indent=1, sort_keys=True) + "\n").encode()


def unseal_json(
    data: bytes, shown: str, writer: str, *, verify: bool = True, error: type[CheckpointError] = CheckpointError
) -> dict[str, Any]:
    """The object :func:`seal_json` wrote, its seal removed and (with ``verify``) checked.

    Args:
        data: the file's bytes.
        shown: the file's name in messages.
        writer: what writes such files, for the message when the seal is missing.
        verify: compare the CRC-32 (a hand edit or damage that keeps it valid JSON).
        error: the ``CheckpointError`` subclass to raise.

    Raises:
        CheckpointError: not JSON, not an object, not sealed, or (with ``verify``) altered.

    Examples:
        >>> unseal_json(b'{"rows": 3}', "meta.json", "dumps()")
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: meta.json: has no 'crc32' field: not written by dumps().
    """
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as reason:
        raise error(f"{shown}: not valid JSON ({len(data)} bytes; {reason}): truncated or overwritten?") from None
    if not isinstance(body, dict):
        raise error(f"{shown}: holds a JSON {type(body).__name__}, not an object.")
    sealed = body.pop("crc32", None)
    if not isinstance(sealed, int):
        raise error(f"{shown}: has no 'crc32' field: not written by {writer}.")
    if verify and zlib.crc32(_canonical(body)) != sealed:
        raise error(f"{shown}: its content does not match its checksum (edited or damaged).")
    return body


def read_bytes(file: Path, error: type[CheckpointError] = CheckpointError) -> bytes:
    """``file``'s bytes; a missing or unreadable file raises ``error`` naming it.

    Examples:
        >>> read_bytes(Path("/nonexistent/meta.json"))
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: /nonexistent/meta.json: missing.
    """
    try:
        return file.read_bytes()
    except FileNotFoundError:
        raise error(f"{file}: missing.") from None
    except OSError as reason:
        raise error(f"{file}: cannot be read ({type(reason).__name__}: {reason}).") from None


def write_meta(file: Path, body: dict[str, Any]) -> None:
    """Writes ``body`` as JSON into ``file``, with a CRC-32 of it under ``"crc32"``.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "meta.json"
        >>> write_meta(file, {"format": "example", "version": 1, "rows": 3})
        >>> read_meta(file, "example")["rows"]
        3
    """
    file.write_bytes(seal_json(body))


def read_meta(file: Path, expected_format: str, verify: bool = True) -> dict[str, Any]:
    """The metadata that :func:`write_meta` wrote into ``file``.

    Args:
        file: the JSON file.
        expected_format: what its ``"format"`` field must say.
        verify: check its CRC-32 (a hand edit or damage that keeps it valid JSON).

    Raises:
        CheckpointError: the file is missing, unreadable, not JSON, not sealed, altered,
            of another format or of a newer version.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "meta.json"
        >>> write_meta(file, {"format": "example", "version": 1, "rows": 3})
        >>> _ = file.write_text(file.read_text().replace('"rows": 3', '"rows": 4'))
        >>> read_meta(file, "example")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: .../meta.json: its content does not match its ...
    """
    body = unseal_json(read_bytes(file), str(file), "dumps()", verify=verify)
    if body.get("format") != expected_format:
        raise CheckpointError(f"{file}: its format is {body.get('format')!r}, expected {expected_format!r}.")
    if body.get("version") != VERSION:
        raise CheckpointError(
            f"{file}: format version {body.get('version')!r}; this Cadence reads version {VERSION}."
        )
    return body


def field(meta: Mapping[str, Any], name: str, kind: type | tuple[type, ...], file: Path) -> Any:
    """``meta[name]``, checked to be a ``kind`` (``bool`` is not taken for an ``int``).

    Raises:
        CheckpointError: the field is missing or of another type.

    Examples:
        >>> field({"rows": 3}, "rows", int, Path("meta.json"))
        3
        >>> field({"rows": "3"}, "rows", int, Path("meta.json"))
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: meta.json: field 'rows' should be int, holds '3'.
    """
    if name not in meta:
        raise CheckpointError(f"{file}: field {name!r} is missing.")
    value = meta[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        raise CheckpointError(f"{file}: field {name!r} should be {names}, holds {value!r}.")
    return value


def shape_field(meta: Mapping[str, Any], name: str, file: Path) -> list[int]:
    """``meta[name]`` checked to be a list of non-negative ints.

    Examples:
        >>> shape_field({"shape": [4, 3]}, "shape", Path("meta.json"))
        [4, 3]
    """
    shape = field(meta, name, list, file)
    if not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in shape):
        raise CheckpointError(f"{file}: field {name!r} should be a list of non-negative ints, holds {shape!r}.")
    return shape


# ---------------------------------------------------------------------- raw tensor files
def file_entry(file: Path) -> dict[str, int]:
    """The byte count and CRC-32 of ``file``, as metadata records them.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x"
        >>> _ = file.write_bytes(b"abc")
        >>> file_entry(file)
        {'bytes': 3, 'crc32': 891568578}
    """
    crc, size = 0, 0
    with open(file, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return {"bytes": size, "crc32": crc}


def write_raw(tensor: torch.Tensor, file: Path) -> dict[str, int]:
    """Writes the bytes of ``tensor`` (row-major) into ``file``; returns their count and CRC-32.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x.bin"
        >>> write_raw(torch.arange(4, dtype=torch.int32), file)["bytes"]
        16
    """
    flat = tensor.detach().as_subclass(torch.Tensor).cpu().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy()  # a byte view works for every dtype (bfloat16 has no numpy twin)
    crc = 0
    with open(file, "wb") as handle:
        for start in range(0, raw.size, _CHUNK):
            chunk = memoryview(raw[start : start + _CHUNK])
            crc = zlib.crc32(chunk, crc)
            handle.write(chunk)
    return {"bytes": int(raw.size), "crc32": crc}


def file_size(file: Path, shown: str | None = None, error: type[CheckpointError] = CheckpointError) -> int:
    """``file``'s size in bytes; a missing or unreadable file raises ``error`` naming ``shown`` (``file``).

    Examples:
        >>> file_size(Path("/nonexistent/data.bin"), "ckpt/data.bin")
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: ckpt/data.bin: missing.
    """
    shown = str(file) if shown is None else shown
    try:
        return file.stat().st_size
    except FileNotFoundError:
        raise error(f"{shown}: missing.") from None
    except OSError as reason:
        raise error(f"{shown}: cannot be read ({type(reason).__name__}: {reason}).") from None


def _check_size(file: Path, expected: int) -> None:
    size = file_size(file)
    if size != expected:
        hint = " (truncated)" if size < expected else ""
        raise CheckpointError(f"{file}: holds {size} bytes, its metadata says {expected}{hint}.")


def _entry_numbers(entry: Any, file: Path) -> tuple[int, int]:
    if not isinstance(entry, Mapping):
        raise CheckpointError(f"{file}: its metadata entry should be an object, got {entry!r}.")
    size = field(entry, "bytes", int, file)
    crc = field(entry, "crc32", int, file)
    if size < 0:
        raise CheckpointError(f"{file}: its metadata gives a negative size ({size}).")
    return size, crc


def map_raw(
    file: Path, dtype: torch.dtype, shape: list[int], entry: Mapping[str, Any], verify: bool = True
) -> torch.Tensor:
    """The tensor :func:`write_raw` wrote, on a private memory map of ``file`` (copy-on-write:
    the file is never changed).

    Args:
        file: the raw file.
        dtype: its dtype.
        shape: its shape.
        entry: its metadata (``"bytes"``, ``"crc32"``).
        verify: compare its CRC-32 (its size is always checked).

    Raises:
        CheckpointError: the file is missing, of another size than ``shape`` and
            ``dtype`` make, or than recorded, or its checksum differs.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x.bin"
        >>> entry = write_raw(torch.arange(6.0).reshape(2, 3), file)
        >>> map_raw(file, torch.float32, [2, 3], entry).tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    size, crc = _entry_numbers(entry, file)
    itemsize = torch.empty((), dtype=dtype).element_size()
    expected = math.prod(shape) * itemsize
    if size != expected:
        raise CheckpointError(
            f"{file}: its metadata gives {size} bytes, but shape {shape} of {dtype_name(dtype)} takes {expected}."
        )
    _check_size(file, expected)
    if expected == 0:  # nothing to map (an empty file cannot be memory-mapped)
        return torch.empty(shape, dtype=dtype)
    try:
        mapped = np.memmap(file, dtype=np.uint8, mode="c", shape=(expected,))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{file}: cannot be mapped ({type(error).__name__}: {error}).") from error
    if verify:
        found = 0
        for start in range(0, expected, _CHUNK):
            found = zlib.crc32(memoryview(mapped[start : start + _CHUNK]), found)
        if found != crc:
            raise CheckpointError(f"{file}: its checksum differs from the one recorded when it was written (damaged).")
    return torch.from_numpy(mapped).view(dtype).reshape(shape)


# ---------------------------------------------------------------------- state files (weights_only)
class _Tagged:
    """A value that ``torch.load(weights_only=True)`` cannot rebuild by itself, written as
    ``kind`` plus plain data (the one class allowed into such a load besides torch's own;
    building it runs nothing but this constructor)."""

    def __init__(self, kind: str, payload: Any) -> None:
        self.kind = kind
        self.payload = payload

    def __reduce__(self) -> tuple[type, tuple[str, Any]]:
        return (_Tagged, (self.kind, self.payload))


_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def encode_state(value: Any, where: str) -> Any:
    """``value`` made of what ``torch.load(weights_only=True)`` rebuilds.

    Tensors (plain ones: a memory-mapped tensor is copied), numbers, strings, bytes,
    ``None``, dtypes, devices, sizes, and lists, tuples, sets and dicts of them pass;
    numpy arrays and scalars and ``TensorDict`` objects are tagged (``decode_state``
    rebuilds them).

    Args:
        value: the state.
        where: how errors name it (``"ListStorage item 3"``).

    Raises:
        TypeError: something in ``value`` is none of these (its place is named).

    Examples:
        >>> import numpy as np
        >>> state = decode_state(encode_state({"rng": np.arange(3), "n": np.int64(2)}, "state"))
        >>> state["rng"].tolist(), type(state["n"]).__name__
        ([0, 1, 2], 'int64')
        >>> encode_state({"f": len}, "state")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: state['f'] is a builtin_function_or_method, which a checkpoint cannot hold (it holds tensors, ...
    """
    if isinstance(value, torch.Tensor):
        plain = value.detach().as_subclass(torch.Tensor)
        return plain.clone() if type(value) is not torch.Tensor else plain
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.names is not None:
            raise TypeError(f"{where} is a numpy array of dtype {value.dtype}, which a checkpoint cannot hold.")
        return _Tagged("ndarray", torch.from_numpy(np.array(value)))  # np.array: a copy, writable and contiguous
    if isinstance(value, np.generic):
        return _Tagged("numpy_scalar", encode_state(np.asarray(value), where))
    if isinstance(value, TensorDictBase):
        entries = {}
        for key, entry in value.items():
            if not isinstance(entry, (torch.Tensor, TensorDictBase)):
                raise TypeError(
                    f"{where}[{key!r}] is a {type(entry).__name__}: a checkpoint holds tensordicts of tensors only."
                )
            entries[key] = encode_state(entry, f"{where}[{key!r}]")
        device = None if value.device is None else str(value.device)
        return _Tagged("tensordict", {"batch_size": list(value.batch_size), "device": device, "entries": entries})
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        items = [encode_state(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if type(value) in (set, frozenset):
        items = {encode_state(item, f"{where} item") for item in value}
        return items if isinstance(value, set) else _Tagged("frozenset", items)
    if type(value) in (dict, collections.OrderedDict):
        encoded = type(value)(
            (encode_state(key, f"{where} key"), encode_state(item, f"{where}[{key!r}]")) for key, item in value.items()
        )
        metadata = getattr(value, "_metadata", None)  # what nn.Module.state_dict attaches (versions)
        if metadata is not None:
            encoded._metadata = encode_state(metadata, f"{where}._metadata")  # type: ignore[attr-defined]
        return encoded
    raise TypeError(
        f"{where} is a {type(value).__name__}, which a checkpoint cannot hold (it holds tensors, numpy arrays, "
        f"TensorDicts, numbers, strings, bytes, None, and lists, tuples, sets and dicts of them: no code)."
    )


def decode_state(value: Any) -> Any:
    """Rebuilds what :func:`encode_state` tagged.

    Examples:
        >>> decode_state(encode_state((1, [2.0], {"a": None}), "state"))
        (1, [2.0], {'a': None})
    """
    if isinstance(value, _Tagged):
        if value.kind == "ndarray":
            return value.payload.numpy()
        if value.kind == "numpy_scalar":
            return decode_state(value.payload)[()]
        if value.kind == "frozenset":
            return frozenset(decode_state(item) for item in value.payload)
        if value.kind == "tensordict":
            payload = value.payload
            entries = {key: decode_state(item) for key, item in payload["entries"].items()}
            return TensorDict(entries, batch_size=payload["batch_size"], device=payload["device"])
        raise ValueError(f"unknown tagged value {value.kind!r}")
    if isinstance(value, list):
        return [decode_state(item) for item in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(decode_state(item) for item in value)
    if isinstance(value, set):
        return {decode_state(item) for item in value}
    if isinstance(value, dict):
        decoded = type(value)((decode_state(key), decode_state(item)) for key, item in value.items())
        metadata = getattr(value, "_metadata", None)
        if metadata is not None:
            decoded._metadata = decode_state(metadata)
        return decoded
    return value


def save_state(state: Any, file: Path) -> dict[str, int]:
    """Writes ``state`` (as :func:`encode_state` made it, or plain) into ``file``; returns
    its byte count and CRC-32 for the metadata.

    Examples:
        >>> import tempfile
        >>> sorted(save_state({"a": 1}, Path(tempfile.mkdtemp()) / "s.pt"))
        ['bytes', 'crc32']
    """
    torch.save(state, file)
    return file_entry(file)


def load_state(file: Path, entry: Mapping[str, Any], verify: bool = True) -> Any:
    """What :func:`save_state` wrote into ``file``, tags rebuilt, read with
    ``torch.load(weights_only=True)`` (tensors on the CPU).

    Args:
        file: the state file.
        entry: its metadata (``"bytes"``, ``"crc32"``).
        verify: compare its CRC-32 (its size is always checked).

    Raises:
        CheckpointError: the file is missing, of another size than recorded, its
            checksum differs, or it holds anything but data (code is never run).

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "s.pt"
        >>> torch.save({"f": print}, file)  # a pickle that names a function
        >>> load_state(file, file_entry(file))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        cadence.data.replay_buffers.checkpoint.CheckpointError: .../s.pt: not a state file that holds only data, ...
    """
    size, crc = _entry_numbers(entry, file)
    _check_size(file, size)
    if verify and file_entry(file)["crc32"] != crc:
        raise CheckpointError(f"{file}: its checksum differs from the one recorded when it was written (damaged).")
    try:
        with torch.serialization.safe_globals([_Tagged]):
            state = torch.load(file, map_location="cpu", weights_only=True)
        return decode_state(state)
    except Exception as error:  # whatever the unpickler or a tag rejects, the file is not ours
        raise CheckpointError(
            f"{file}: not a state file that holds only data, refused without running anything "
            f"({type(error).__name__}: {weights_only_reason(error)})."
        ) from error


def weights_only_reason(error: BaseException) -> str:
    """What ``torch.load(weights_only=True)`` found wrong with a file, out of torch's long
    message, without its advice to load the file anyway (with ``weights_only=False`` or an
    allow-list): the file is refused, and nothing should suggest running it.

    Examples:
        >>> import pickle
        >>> message = ("Weights only load failed. Re-running `torch.load` with `weights_only` set to `False` "
        ...            "will likely succeed.\\n\\nTrying to load unsupported GLOBAL posix.system whose module "
        ...            "posix is blocked.\\n\\nCheck the documentation of torch.load.")
        >>> weights_only_reason(pickle.UnpicklingError(message))
        'Trying to load unsupported GLOBAL posix.system whose module posix is blocked.'
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if "WeightsUnpickler error:" in line:
            reason = line.split("WeightsUnpickler error:", 1)[1].strip()
            if not reason and index + 1 < len(lines):  # torch puts some reasons on the next line
                reason = lines[index + 1]
            return reason.split(" Please ", 1)[0][:300]
        if line.startswith(("Unsupported", "Trying to load unsupported")):
            return line.split(" Please ", 1)[0][:300]
    first = lines[0] if lines else type(error).__name__
    if "weights_only" in first or "Weights only" in first:
        return "it holds something other than tensors and plain data"
    return first[:300]