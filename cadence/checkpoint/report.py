"""What a checkpoint load reports, and the error that carries it.

Examples:
    >>> result = CheckpointLoadResult(loaded={"policy"})
    >>> error = CheckpointError("/tmp/run.ckpt: truncated", result)
    >>> error.result.loaded, isinstance(error, ValueError), isinstance(error, RuntimeError)
    ({'policy'}, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cadence.data.replay_buffers.checkpoint import CheckpointError as _FileCheckpointError

__all__ = ["CheckpointError", "CheckpointLoadResult"]


# A RuntimeError as well: the reference library raises RuntimeError subclasses for
# checkpoints, and scripts written for it may catch that.
class CheckpointError(_FileCheckpointError, RuntimeError):
    """A checkpoint cannot be written or restored: a file is missing, truncated, damaged,
    holds anything but data, or does not fit the component it should load into.

    The message names the file (and the component); ``result`` holds what the load had
    done when it stopped, when it stopped during a load.

    Args:
        message: what is wrong, naming the file.
        result: the report of the load that failed, if any.

    Examples:
        >>> error = CheckpointError("/tmp/ckpt/manifest.json: missing.")
        >>> str(error), error.result is None
        ('/tmp/ckpt/manifest.json: missing.', True)
    """

    def __init__(self, message: str, result: CheckpointLoadResult | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class CheckpointLoadResult:
    """What :meth:`cadence.checkpoint.Checkpoint.load` did.

    Args:
        loaded: the components restored.
        missing: the components asked for that the checkpoint does not hold.
        incompatible: the components that could not be restored, with the reason (the
            file named in it).
        unrequested: the components the checkpoint holds that were not asked for.
        values: what value components (dicts, lists, numbers, strings) were restored to;
            dicts and lists registered as components are also updated in place.
        manifest: the checkpoint's manifest (what it holds and which versions wrote it).
        comparison: ``{"versions": {name: {"checkpoint", "runtime", "matches"}},
            "version_skew": bool}`` for cadence, torch and tensordict.

    Examples:
        >>> CheckpointLoadResult().missing
        set()
    """

    loaded: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    incompatible: dict[str, str] = field(default_factory=dict)
    unrequested: set[str] = field(default_factory=set)
    values: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    comparison: dict[str, Any] = field(default_factory=dict)
