"""The files of a training checkpoint and of a saved policy, written so that reading
them runs no code, and checked before they are used.

A checkpoint directory (one of ``runs/<name>/checkpoints/``) holds:

* ``state.pt``: the learner's state (networks, optimiser, counters, generators' states),
  tensors and plain values only, read with ``torch.load(weights_only=True)``;
* ``simulators.pkl``: the simulator snapshots (see ``simulators``), a pickle, present
  only when the simulators could be saved; unpickled only when its HMAC signature
  matches the run's key (see ``run_folder``);
* ``manifest.json``: each file's size and SHA-256 (and the snapshot's signature), so
  that a truncated, damaged or replaced file is named before it is read;
* ``buffer/``: the replay buffer (its own checked format, see ``ReplayBuffer.dumps``).

Every problem with these files is a :class:`CheckpointError` naming the file.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> directory = Path(tempfile.mkdtemp())
    >>> write_training_state(directory, {"frames": 10}, simulators=None, key=None)
    >>> read_training_state(directory, key=None, required=("frames",))
    ({'frames': 10}, None, None)
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cadence.data.replay_buffers._checkpoint_files import weights_only_reason
from cadence.data.replay_buffers.checkpoint import CheckpointError
from cadence.trainers.run_folder import key_directory, sign, signature_matches

__all__ = [
    "KEPT_CHECKPOINTS",
    "load_tensors",
    "numpy_rng_from_state",
    "numpy_rng_state",
    "read_policy_file",
    "read_training_state",
    "write_training_state",
]

STATE_FILE = "state.pt"
SIMULATORS_FILE = "simulators.pkl"
MANIFEST_FILE = "manifest.json"
#: checkpoints kept on disk: the newest, and the one before it to fall back to
KEPT_CHECKPOINTS = 2


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def load_tensors(path: Path) -> Any:
    """``torch.load(path, weights_only=True)``: tensors, containers and plain values,
    nothing that runs code.

    Raises:
        CheckpointError: naming ``path``, if it is missing, damaged, or holds anything
            else (a pickled object of some class, say).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "x.pt"
        >>> torch.save({"step": 3}, path)
        >>> load_tensors(path)
        {'step': 3}
    """
    if not path.is_file():
        raise CheckpointError(f"{path}: missing")
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"{path}: holds more than tensors and plain values (refused, nothing in it was run): "
            f"{weights_only_reason(err)}"
        ) from None
    except Exception as err:  # torch's zip reader and unpickler raise many kinds on a damaged file
        raise CheckpointError(f"{path}: cannot be read (truncated or damaged?): {_first_line(err)}") from None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_training_state(
    directory: Path, state: dict[str, Any], simulators: list[Any] | None, key: bytes | None
) -> None:
    """Writes ``state`` (tensors and plain values) and, if given, the simulator snapshots
    (signed with ``key``; not written without one) into ``directory``, with the manifest.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> directory = Path(tempfile.mkdtemp())
        >>> write_training_state(directory, {"frames": 1}, simulators=[{"x": 1}], key=b"k" * 32)
        >>> sorted(path.name for path in directory.iterdir())
        ['manifest.json', 'simulators.pkl', 'state.pt']
    """
    files: dict[str, dict[str, Any]] = {}
    torch.save(state, directory / STATE_FILE)
    data = (directory / STATE_FILE).read_bytes()
    files[STATE_FILE] = {"bytes": len(data), "sha256": _digest(data)}
    if simulators is not None and key is not None:
        blob = pickle.dumps(simulators, protocol=pickle.HIGHEST_PROTOCOL)
        (directory / SIMULATORS_FILE).write_bytes(blob)
        files[SIMULATORS_FILE] = {"bytes": len(blob), "sha256": _digest(blob), "hmac": sign(blob, key)}
    (directory / MANIFEST_FILE).write_text(json.dumps({"format": 1, "files": files}, indent=1) + "\n")


def _read_manifest(directory: Path) -> dict[str, dict[str, Any]]:
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the checkpoint is incomplete, or from an older Cadence)")
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
        for name, entry in files.items():
            if not (isinstance(entry["bytes"], int) and isinstance(entry["sha256"], str)):
                raise TypeError(name)
    except Exception as err:
        raise CheckpointError(f"{path}: not a checkpoint manifest (truncated or altered?): {_first_line(err)}") from None
    return files


def _checked_bytes(directory: Path, name: str, entry: dict[str, Any]) -> bytes:
    """The bytes of ``directory / name``, once they match the manifest's size and digest."""
    path = directory / name
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the manifest lists it)")
    data = path.read_bytes()
    if len(data) != entry["bytes"]:
        raise CheckpointError(f"{path}: {len(data)} bytes, the manifest says {entry['bytes']} (truncated or replaced)")
    if _digest(data) != entry["sha256"]:
        raise CheckpointError(f"{path}: its SHA-256 differs from the manifest's (damaged or replaced)")
    return data


def read_training_state(
    directory: Path, key: bytes | None, required: Iterable[str]
) -> tuple[dict[str, Any], list[Any] | None, str | None]:
    """Reads what :func:`write_training_state` wrote, after checking every file.

    Args:
        directory: the checkpoint directory.
        key: the run's signing key (``None`` if this machine holds none).
        required: the entries ``state.pt`` must hold.

    Returns:
        The state, the simulator snapshots (``None`` if none were saved, or if their
        signature does not check out with ``key``), and a note saying why snapshots were
        refused (``None`` if they were not).

    Raises:
        CheckpointError: naming the file that is missing, truncated, damaged, replaced or
            not of the expected layout.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> directory = Path(tempfile.mkdtemp())
        >>> write_training_state(directory, {"frames": 1}, simulators=[1, 2], key=b"a" * 32)
        >>> read_training_state(directory, key=b"a" * 32, required=["frames"])[1]
        [1, 2]
        >>> print(read_training_state(directory, key=b"b" * 32, required=["frames"])[2])
        /... is not signed with this run's key ...: not loaded, so the resumed run starts new episodes
    """
    files = _read_manifest(directory)
    if STATE_FILE not in files:
        raise CheckpointError(f"{directory / MANIFEST_FILE}: lists no {STATE_FILE}")
    _checked_bytes(directory, STATE_FILE, files[STATE_FILE])
    state = load_tensors(directory / STATE_FILE)
    if not isinstance(state, dict):
        raise CheckpointError(f"{directory / STATE_FILE}: expected a dict of the training state, got {type(state).__name__}")
    missing = [name for name in required if name not in state]
    if missing:
        raise CheckpointError(f"{directory / STATE_FILE}: not a training state, it lacks {', '.join(missing)}")
    if SIMULATORS_FILE not in files:
        return state, None, None
    entry = files[SIMULATORS_FILE]
    blob = _checked_bytes(directory, SIMULATORS_FILE, entry)
    if not signature_matches(blob, entry.get("hmac"), key):
        why = "no key for this run is kept here" if key is None else "its signature does not match"
        note = (
            f"{directory / SIMULATORS_FILE} is not signed with this run's key ({why}; keys live in "
            f"{key_directory()}): not loaded, so the resumed run starts new episodes"
        )
        return state, None, note
    return state, pickle.loads(blob), None  # signed by this run's own key: written by this user's Cadence


def read_policy_file(path: Path) -> dict[str, torch.Tensor]:
    """The policy weights in a ``policy.pt`` (what ``cadence eval`` plays), read without
    running code.

    Raises:
        CheckpointError: naming ``path`` if it is damaged or not a policy file.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "policy.pt"
        >>> torch.save({"config": {}, "policy": {"w": torch.zeros(1)}}, path)
        >>> read_policy_file(path)
        {'w': tensor([0.])}
    """
    content = load_tensors(path)
    weights = content.get("policy") if isinstance(content, dict) else None
    if not isinstance(weights, dict) or not all(isinstance(value, torch.Tensor) for value in weights.values()):
        raise CheckpointError(f"{path}: not a policy file of cadence train (no 'policy' dict of tensors in it)")
    return weights


def numpy_rng_state() -> dict[str, Any]:
    """numpy's global generator state as tensors and plain values (``weights_only``
    loading refuses numpy arrays).

    Examples:
        >>> state = numpy_rng_state()
        >>> numpy_rng_from_state(state)
        >>> state["keys"].shape
        torch.Size([624])
    """
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
            "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}


def numpy_rng_from_state(state: dict[str, Any]) -> None:
    """Restores :func:`numpy_rng_state`'s output into numpy's global generator."""
    keys = state["keys"].numpy().astype(np.uint32)
    np.random.set_state((state["kind"], keys, state["position"], state["has_gauss"], state["cached_gaussian"]))
