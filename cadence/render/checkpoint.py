"""Policy checkpoints for rendering: a policy's weights with what rebuilds its env.

``save_render_checkpoint`` writes them, ``load_checkpoint`` reads them back as one dict
(``"model_state_dict"``, the env metadata's entries, ``"frames"``, ``"metrics"``,
``"config"``, and the extra entries), ``infer_state_dict`` finds the weights in such a
dict, ``checkpoint_hash`` fingerprints the files.

Three layouts, all data only (reading them runs no code):

- ``format="archive"`` or ``"directory"``: a :class:`~cadence.checkpoint.Checkpoint`
  with the components ``policy``, ``environment_metadata``, ``trainer_state``,
  ``metrics``, ``config`` and ``extra``;
- ``format=None``: one file holding the dict itself, written with ``torch.save`` from
  tensors and plain values only, so that ``torch.load(path, weights_only=True)`` reads it
  with no allow-list. The reference library writes a pickle of whatever the dict holds
  there; Cadence refuses, when saving, anything that is not data (naming it).

Examples:
    >>> import tempfile, torch
    >>> policy = torch.nn.Linear(4, 2)
    >>> folder = tempfile.mkdtemp()
    >>> path = save_render_checkpoint(f"{folder}/policy.pt", policy, env_metadata={"env_name": "CartPole-v1"},
    ...                               frames=1000, format="archive")
    >>> payload = load_checkpoint(path)
    >>> payload["env_name"], payload["frames"], sorted(infer_state_dict(payload))
    ('CartPole-v1', 1000, ['bias', 'weight'])
"""

from __future__ import annotations

import hashlib
import os
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from cadence.checkpoint import Checkpoint, CheckpointError, CheckpointFormat
from cadence.checkpoint._files import fsync_dir, fsync_file, torch_load_error

__all__ = ["checkpoint_hash", "infer_state_dict", "load_checkpoint", "save_render_checkpoint"]

_STATE_DICT_KEYS = ("model_state_dict", "policy", "state_dict")
_VALUE_COMPONENTS = ("environment_metadata", "trainer_state", "metrics", "config", "extra")


class _HeldStateDict:
    """A state dict standing in for a module: what the ``policy`` component saves, and
    what it loads into when read back without the module."""

    def __init__(self, state_dict: Mapping[str, Any] | None = None) -> None:
        self.value = state_dict

    def state_dict(self) -> Mapping[str, Any]:
        if self.value is None:
            raise ValueError("no state dict is held")
        return self.value

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.value = state_dict


def save_render_checkpoint(
    path: str | Path | None,
    model: Any,
    *,
    env_metadata: Mapping[str, Any] | None = None,
    frames: int | None = None,
    metrics: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    format: CheckpointFormat | None = None,
) -> Path | None:
    """Writes a policy checkpoint that :func:`load_checkpoint` reads back as one dict.

    The weights go under ``"model_state_dict"``; the entries of ``env_metadata`` (such as
    ``"env_name"``, ``"env_backend"``, ``"vecnorm"``) and of ``extra`` are merged at the top
    level. Writing is crash-safe (written aside, then renamed over ``path``).

    Args:
        path: where to write; ``None`` or ``""`` writes nothing.
        model: a module (its ``state_dict()``) or a state dict.
        env_metadata: what rebuilds the env (tensors allowed).
        frames: the frames collected so far.
        metrics: scalar metrics.
        config: the training configuration.
        extra: more entries, merged last.
        format: ``"archive"`` (one zip file) or ``"directory"``: a Cadence checkpoint;
            ``None``: one ``torch.save`` file of the dict, data only (see the module).

    Returns:
        The path written, or ``None`` when ``path`` is ``None`` or ``""``.

    Raises:
        TypeError: an entry is not data (an object that would need code to be rebuilt);
            it is named, and nothing is written.

    Examples:
        >>> import tempfile, torch
        >>> save_render_checkpoint(None, torch.nn.Linear(1, 1)) is None
        True
        >>> path = save_render_checkpoint(tempfile.mkdtemp() + "/policy.pt", {"w": torch.ones(2)}, frames=5)
        >>> sorted(torch.load(path, weights_only=True))
        ['frames', 'model_state_dict']
    """
    if path is None or path == "":
        return None
    destination = Path(path).expanduser().absolute()
    state = dict(model) if isinstance(model, Mapping) else model.state_dict()
    if format is None:
        payload: dict[str, Any] = {"model_state_dict": state}
        payload.update(dict(env_metadata or {}))
        if frames is not None:
            payload["frames"] = int(frames)
        if metrics is not None:
            payload["metrics"] = dict(metrics)
        if config is not None:
            payload["config"] = dict(config)
        payload.update(dict(extra or {}))
        _write_plain_file(destination, _plain(payload, "the checkpoint"))
        return destination
    # the weights alone (not the generators a module may hold): a render checkpoint is a policy's weights
    components: dict[str, Any] = {"policy": _HeldStateDict(state)}
    if env_metadata is not None:
        components["environment_metadata"] = dict(env_metadata)
    if frames is not None:
        components["trainer_state"] = {"frames": int(frames)}
    if metrics is not None:
        components["metrics"] = dict(metrics)
    if config is not None:
        components["config"] = dict(config)
    if extra is not None:
        components["extra"] = dict(extra)
    return Checkpoint(format=format, **components).save(destination)


def load_checkpoint(
    path: str | Path,
    map_location: str | torch.device = "cpu",
    *,
    weights_only: bool | None = None,
) -> Any:
    """Reads a policy checkpoint: a Cadence checkpoint (folder or archive) as the dict
    :func:`save_render_checkpoint` describes, or a ``torch.save`` file as what it holds.

    Nothing read runs code: files are read with ``torch.load(weights_only=True)``.

    Args:
        path: the checkpoint.
        map_location: where the tensors go (``"cpu"``).
        weights_only: accepted for the reference's signature; ``False`` is ignored with
            a warning (a ``torch.save`` file that holds more than data is refused).

    Returns:
        The payload.

    Raises:
        FileNotFoundError: nothing is at ``path``.
        CheckpointError: the file is damaged, or holds more than tensors and plain
            values (refused, nothing in it was run); the file is named.

    Examples:
        >>> import tempfile, torch
        >>> path = Path(tempfile.mkdtemp()) / "old.pt"
        >>> torch.save({"model_state_dict": {"w": torch.zeros(1)}, "step": print}, path)
        >>> load_checkpoint(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        cadence.checkpoint.report.CheckpointError: .../old.pt: holds more than tensors and plain values (refused, nothing in it was run; ...
    """
    if "://" in str(path):
        raise ValueError(f"only local checkpoint paths are supported, got {str(path)!r}.")
    source = Path(path).expanduser().absolute()
    if not source.exists():
        raise FileNotFoundError(f"{source}: no checkpoint there (nothing at that path).")
    if weights_only is False:
        warnings.warn(
            "load_checkpoint: weights_only=False is ignored: Cadence reads checkpoints with weights_only=True "
            "(a checkpoint holds data; no file is allowed to run code).",
            UserWarning,
            stacklevel=2,
        )
    if Checkpoint.is_checkpoint(source):
        return _load_unified(source, map_location)
    if source.is_dir():
        raise CheckpointError(f"{source}: a folder that holds no Cadence checkpoint.")
    return _load_plain_file(source, map_location)


def checkpoint_hash(path: str | Path) -> str:
    """The SHA-256 of a checkpoint's bytes (a folder's files with their relative names,
    in sorted order).

    Raises:
        FileNotFoundError: nothing is at ``path``.

    Examples:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "x.pt"
        >>> _ = file.write_bytes(b"abc")
        >>> checkpoint_hash(file)[:16]
        'ba7816bf8f01cfea'
    """
    source = Path(path).expanduser()
    if not source.exists():
        raise FileNotFoundError(f"{source}: no checkpoint there (nothing at that path).")
    digest = hashlib.sha256()
    files = sorted(source.rglob("*")) if source.is_dir() else [source]
    for file in files:
        if not file.is_file() or file.is_symlink():
            continue
        if source.is_dir():  # the names too: moving bytes between files changes the checkpoint
            digest.update(file.relative_to(source).as_posix().encode() + b"\0")
        with open(file, "rb") as handle:
            while chunk := handle.read(2**20):
                digest.update(chunk)
    return digest.hexdigest()


def infer_state_dict(payload: Any, key: str | None = None) -> Mapping[str, torch.Tensor]:
    """The weights in a checkpoint's payload: ``payload[key]``, else the first of
    ``"model_state_dict"``, ``"policy"``, ``"state_dict"`` that maps names to tensors, else
    ``payload`` itself if it does.

    Raises:
        KeyError: ``key`` is given and ``payload`` has no such entry.
        TypeError: no state dict is found.

    Examples:
        >>> import torch
        >>> infer_state_dict({"policy": {"w": torch.ones(1)}, "frames": 3})
        {'w': tensor([1.])}
        >>> infer_state_dict({"frames": 3})
        Traceback (most recent call last):
        ...
        TypeError: no state dict in the checkpoint's payload: expected one under 'model_state_dict', 'policy' or 'state_dict' (names to tensors), or the payload to be one; got a dict of ['frames'].
    """
    if key is not None:
        if not isinstance(payload, Mapping) or key not in payload:
            raise KeyError(f"the checkpoint's payload has no entry {key!r}.")
        payload = payload[key]
    elif isinstance(payload, Mapping):
        for candidate in _STATE_DICT_KEYS:
            if _is_state_dict(payload.get(candidate)):
                return payload[candidate]
    if _is_state_dict(payload):
        return payload
    found = f"a dict of {sorted(map(str, payload))}" if isinstance(payload, Mapping) else f"a {type(payload).__name__}"
    raise TypeError(
        "no state dict in the checkpoint's payload: expected one under 'model_state_dict', 'policy' or "
        f"'state_dict' (names to tensors), or the payload to be one; got {found}."
    )


# ---------------------------------------------------------------------- helpers
def _is_state_dict(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(name, str) for name in value)
        and any(isinstance(item, torch.Tensor) for item in value.values())
    )


def _plain(value: Any, where: str) -> Any:
    """``value`` made of what ``torch.load(weights_only=True)`` reads with no allow-list:
    tensors (plain, on the CPU), numbers, strings, ``None``, and lists, tuples and dicts
    of them; numpy arrays become tensors, numpy scalars numbers, paths strings.

    Raises:
        TypeError: something else is in ``value`` (its place is named).
    """
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).cpu().clone()
    if isinstance(value, np.generic):  # first: np.float64 is a float too, but pickles as numpy
        return _plain(value.item(), where)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.ndarray) and not value.dtype.hasobject and value.dtype.names is None:
        return torch.from_numpy(np.array(value))
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        plain = {}
        for name, item in value.items():
            if not isinstance(name, (str, int)) or isinstance(name, bool):
                raise TypeError(f"{where} has the key {name!r}: keys must be strings or ints.")
            plain[name] = _plain(item, f"{where}[{name!r}]")
        return plain
    if isinstance(value, (list, tuple)):
        items = [_plain(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    raise TypeError(
        f"{where} is a {type(value).__name__}, which a checkpoint cannot hold (it holds tensors, numpy arrays, "
        f"numbers, strings, None, and lists, tuples and dicts of them: no code)."
    )


def _write_plain_file(destination: Path, payload: dict[str, Any]) -> None:
    """``torch.save(payload)`` into a hidden file beside ``destination``, renamed over it."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.is_dir():
        raise CheckpointError(f"{destination}: is a folder; format=None writes one file there.")
    partial = destination.parent / f".{destination.name}.{uuid.uuid4().hex}.partial"
    try:
        torch.save(payload, partial)
        fsync_file(partial)
        os.replace(partial, destination)
        fsync_dir(destination.parent)
    finally:
        partial.unlink(missing_ok=True)


def _load_plain_file(source: Path, map_location: Any) -> Any:
    try:
        return torch.load(source, map_location=map_location, weights_only=True)
    except Exception as error:  # the unpickler refused it, or it is no torch file
        raise torch_load_error(error, str(source)) from None


def _load_unified(source: Path, map_location: Any) -> dict[str, Any]:
    """The payload dict of a Cadence checkpoint written by :func:`save_render_checkpoint`."""
    stored = Checkpoint.manifest(source)["components"]
    policy = _HeldStateDict()
    values: dict[str, dict[str, Any]] = {name: {} for name in _VALUE_COMPONENTS}
    checkpoint = Checkpoint(policy=policy, **values)
    present = [name for name in ("policy", *_VALUE_COMPONENTS) if name in stored]
    checkpoint.load(source, components=present, map_location=map_location, strict="error")
    payload: dict[str, Any] = {}
    if policy.value is not None:
        payload["model_state_dict"] = policy.value
    payload.update(values["environment_metadata"])
    trainer_state = values["trainer_state"]
    frames = trainer_state.get("frames", trainer_state.get("collected_frames"))
    if frames is not None:
        payload["frames"] = frames
    if values["metrics"]:
        payload["metrics"] = values["metrics"]
    if values["config"]:
        payload["config"] = values["config"]
    payload.update(values["extra"])
    # the whole payload where it is asked for (the checkpoint keeps CPU tensors on the CPU)
    return _moved(payload, None if map_location is None else torch.device(map_location))


def _moved(value: Any, device: torch.device | None) -> Any:
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        moved = (dict if type(value) is not OrderedDict else OrderedDict)(
            (name, _moved(item, device)) for name, item in value.items()
        )
        if getattr(value, "_metadata", None) is not None:  # a module's state dict: its versions
            moved._metadata = value._metadata  # type: ignore[attr-defined]
        return moved
    if isinstance(value, (list, tuple)):
        items = [_moved(item, device) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value
