"""The dump format of tensor storages: raw files, one per entry, described in JSON.

``TensorStorage.dumps`` writes the written rows of each entry to ``data/<n>.bin`` (raw
bytes, row-major) and describes them in ``storage.json``: the storage's size and layout
(``shape``: its first ``ndim`` dims), the data's kind (one tensor or a tensordict), its
batch size, its nested tensordicts, and each entry's key, dtype, shape, byte count and
CRC-32. The three tensor storages share this format, so a ``LazyMemmapStorage``
checkpoint loads into a ``LazyTensorStorage`` and back. Reading checks every size and
shape against the metadata and the storage loaded into before anything is copied.

Examples:
    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> from cadence.data.replay_buffers import LazyTensorStorage
    >>> storage = LazyTensorStorage(10)
    >>> storage.set(torch.arange(2), TensorDict({"obs": torch.ones(2, 3)}, [2]))
    >>> folder = tempfile.mkdtemp()
    >>> storage.dumps(folder)
    >>> sorted(p.name for p in Path(folder).rglob("*"))
    ['0.bin', 'data', 'storage.json']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from cadence.data.replay_buffers._checkpoint_files import (
    dtype_from_name,
    dtype_name,
    field,
    map_raw,
    read_meta,
    shape_field,
    write_meta,
    write_raw,
)
from cadence.data.replay_buffers.checkpoint import CheckpointError

__all__ = ["STORAGE_FORMAT", "read_tensor_dump", "tensor_dump_writer"]

STORAGE_FORMAT = "cadence.replay_buffers.storage"


def tensor_dump_writer(storage: Any, header: dict[str, Any]) -> Callable[[Path], None]:
    """Checks that ``storage`` (a ``TensorStorage``) can be dumped; returns the function
    that writes its ``storage.json`` and raw data files into a directory (``header``:
    the metadata every storage writes).

    Raises:
        TypeError: an entry is not a tensor.

    Examples:
        >>> import tempfile
        >>> from cadence.data.replay_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(torch.arange(2), torch.ones(2, 3))
        >>> folder = Path(tempfile.mkdtemp())
        >>> tensor_dump_writer(storage, storage._dump_header())(folder)
        >>> (folder / "data" / "0.bin").stat().st_size
        24
    """
    header["shape"] = None if storage._storage is None else list(storage._storage.shape[: storage.ndim])
    if storage._storage is None or storage._filled_rows() == 0:

        def write_empty(path: Path) -> None:
            path.mkdir(parents=True, exist_ok=True)
            write_meta(path / "storage.json", {**header, "data": None})

        return write_empty
    filled = storage._storage[: storage._filled_rows()]
    if isinstance(filled, torch.Tensor):
        leaves: list[tuple[tuple[str, ...], Any]] = [((), filled)]
        nested: list[dict[str, Any]] = []
    else:
        leaves = [(_key_path(key), value) for key, value in filled.items(True, True)]
        nested = [
            {"key": list(_key_path(key)), "batch_size": list(value.batch_size)}
            for key, value in filled.items(True)
            if isinstance(value, TensorDictBase)
        ]
    for key, value in leaves:
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{type(storage).__name__}.dumps: entry {key!r} is a {type(value).__name__}; a checkpoint holds "
                f"tensor entries only."
            )

    def write(path: Path) -> None:
        (path / "data").mkdir(parents=True, exist_ok=True)
        described = []
        for number, (key, value) in enumerate(leaves):
            entry = write_raw(value, path / "data" / f"{number}.bin")
            described.append({"key": list(key), "dtype": dtype_name(value.dtype), "shape": list(value.shape),
                              **entry})
        kind = "tensor" if isinstance(filled, torch.Tensor) else "tensordict"
        data = {
            "kind": kind,
            "batch_size": list(filled.batch_size if kind == "tensordict" else filled.shape[: storage.ndim]),
            "tensordicts": nested,
            "leaves": described,
        }
        write_meta(path / "storage.json", {**header, "data": data})

    return write


def read_tensor_dump(storage: Any, path: Path, verify: bool, can_allocate: bool) -> dict[str, Any]:
    """Reads and checks the dump of a ``TensorStorage`` in ``path``; returns the state
    ``storage.load_state_dict`` takes, which cannot fail. Changes nothing.

    Args:
        storage: the storage to load into.
        path: the dump's directory.
        verify: compare the files' checksums.
        can_allocate: whether ``storage`` allocates itself from the data (lazy storages).

    Raises:
        CheckpointError: a file is missing, damaged or inconsistent, or the dump does not
            fit ``storage``.

    Examples:
        >>> import tempfile
        >>> from cadence.data.replay_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(torch.arange(2), torch.ones(2, 3))
        >>> folder = Path(tempfile.mkdtemp())
        >>> storage.dumps(folder)
        >>> state = read_tensor_dump(LazyTensorStorage(4), folder, verify=True, can_allocate=True)
        >>> state["rows_written"], state["storage"].shape
        (2, torch.Size([2, 3]))
    """
    file = path / "storage.json"
    meta = read_meta(file, STORAGE_FORMAT, verify)
    storage._check_dump_fits(meta, file)
    rows_written = meta["rows_written"]
    data = field(meta, "data", (dict, type(None)), file)
    if data is None:
        if rows_written:
            raise CheckpointError(f"{file}: rows_written={rows_written} but no data is described.")
        return {"rows_written": 0, "storage": None}
    shape = shape_field(meta, "shape", file)
    if len(shape) != storage.ndim or not all(shape) or math.prod(shape[1:]) > storage.max_size:
        raise CheckpointError(
            f"{file}: field 'shape' should be {storage.ndim} positive sizes, the product of all but the first at "
            f"most max_size={storage.max_size}; holds {shape}."
        )
    inner = shape[1:]
    row_capacity = storage.max_size // math.prod(inner)
    if shape[0] < row_capacity:
        raise CheckpointError(
            f"{file}: field 'shape' gives {shape[0]} rows, fewer than the {row_capacity} rows of "
            f"{math.prod(inner)} elements that max_size={storage.max_size} makes."
        )
    filled = min(rows_written, row_capacity)
    kind = field(data, "kind", str, file)
    if kind not in ("tensor", "tensordict"):
        raise CheckpointError(f"{file}: data kind {kind!r}; expected 'tensor' or 'tensordict'.")
    batch_size = shape_field(data, "batch_size", file)
    if batch_size[: storage.ndim] != [filled, *inner]:
        raise CheckpointError(
            f"{file}: data of batch size {batch_size} for {filled} written rows of {inner or 'single'} elements "
            f"(rows_written={rows_written}, shape={shape})."
        )
    if kind == "tensor" and len(batch_size) != storage.ndim:
        raise CheckpointError(f"{file}: tensor data of batch size {batch_size}; expected {storage.ndim} dims.")
    leaves = field(data, "leaves", list, file)
    signature: dict[NestedKey, tuple[torch.Size, torch.dtype]] = {}
    described: list[tuple[tuple[str, ...], torch.dtype, list[int], dict[str, Any]]] = []
    for number, leaf in enumerate(leaves):
        leaf_file = path / "data" / f"{number}.bin"
        if not isinstance(leaf, dict):
            raise CheckpointError(f"{file}: leaf {number} should be an object, holds {leaf!r}.")
        key = tuple(field(leaf, "key", list, file))
        if not all(isinstance(part, str) and part for part in key) or (kind == "tensor") != (key == ()):
            raise CheckpointError(f"{file}: leaf {number} has the key {list(key)} for {kind} data.")
        dtype = dtype_from_name(leaf.get("dtype"), file)
        leaf_shape = shape_field(leaf, "shape", file)
        if leaf_shape[: len(batch_size)] != batch_size:
            raise CheckpointError(
                f"{file}: entry {list(key)} ({leaf_file.name}) has shape {leaf_shape}, which does not start "
                f"with the data's batch size {batch_size}."
            )
        signature[_signature_key(key)] = (torch.Size(leaf_shape[storage.ndim :]), dtype)
        described.append((key, dtype, leaf_shape, leaf))
    if kind == "tensor" and len(described) != 1:
        raise CheckpointError(f"{file}: tensor data should have one leaf, has {len(described)}.")
    if len(signature) != len(described):
        raise CheckpointError(f"{file}: an entry is described twice.")
    _check_layout_fits(storage, file, kind, inner, batch_size[storage.ndim :], signature, can_allocate)
    tensors = [(key, map_raw(path / "data" / f"{number}.bin", dtype, leaf_shape, leaf, verify))
               for number, (key, dtype, leaf_shape, leaf) in enumerate(described)]
    if kind == "tensor":
        return {"rows_written": rows_written, "storage": tensors[0][1]}
    try:
        built = TensorDict({}, batch_size=batch_size)
        nested = sorted(field(data, "tensordicts", list, file), key=lambda sub: len(sub.get("key", ())))
        for sub in nested:
            built.set(tuple(sub["key"]), TensorDict({}, batch_size=sub["batch_size"]))
        for key, tensor in tensors:
            built.set(key, tensor)
    except CheckpointError:
        raise
    except Exception as error:  # sizes or nesting that do not fit together
        raise CheckpointError(
            f"{file}: its entries do not make a TensorDict ({type(error).__name__}: {error})."
        ) from error
    return {"rows_written": rows_written, "storage": built}


def _check_layout_fits(storage: Any, file: Path, kind: str, inner: list[int], element_batch: list[int],
                       signature: dict[NestedKey, tuple[torch.Size, torch.dtype]], can_allocate: bool) -> None:
    """Raises ``CheckpointError`` unless dumped data of this layout can be written into ``storage``."""
    if storage._storage is None:
        if not can_allocate:
            raise CheckpointError(
                f"{file}: this {type(storage).__name__} has no allocation to load into; give it a storage."
            )
        return
    own_kind = "tensor" if isinstance(storage._storage, torch.Tensor) else "tensordict"
    if own_kind != kind:
        raise CheckpointError(f"{file}: holds {kind} data, this {type(storage).__name__} holds {own_kind} data.")
    if list(storage._storage.shape[1 : storage.ndim]) != inner or list(storage._element_batch) != element_batch:
        raise CheckpointError(
            f"{file}: holds rows of {inner} elements of batch size {element_batch}; this storage's rows are "
            f"{list(storage._storage.shape[1 : storage.ndim])} elements of batch size {list(storage._element_batch)}."
        )
    if signature != storage._signature:
        ours, theirs = set(map(str, storage._signature)), set(map(str, signature))
        differ = [
            f"{key!r}: element shape {list(signature[key][0])} {dtype_name(signature[key][1])}, this storage's "
            f"{list(storage._signature[key][0])} {dtype_name(storage._signature[key][1])}"
            for key in sorted(set(signature) & set(storage._signature), key=str)
            if signature[key] != storage._signature[key]
        ]
        raise CheckpointError(
            f"{file}: its entries do not match this storage's: missing {sorted(ours - theirs)}, unexpected "
            f"{sorted(theirs - ours)}; {'; '.join(differ) or 'no entry differs in shape or dtype'}."
        )


def _key_path(key: NestedKey) -> tuple[str, ...]:
    """A tensordict key as a tuple of names."""
    return (key,) if isinstance(key, str) else tuple(key)


def _signature_key(path: tuple[str, ...]) -> NestedKey:
    """A tuple of names as ``_leaf_signature`` keys it (``""`` for a plain tensor)."""
    if not path:
        return ""
    return path[0] if len(path) == 1 else path
