"""The process-global random generators as one checkpoint component.

Cadence itself draws from explicit generators (which a ``Checkpoint`` saves with the
components holding them); training scripts and other libraries draw from the global
ones: Python's ``random``, numpy's legacy ``np.random`` and torch's (CPU, and CUDA once
initialised). :class:`GlobalRNGState` saves and restores those.

Examples:
    >>> import random
    >>> rng = GlobalRNGState()
    >>> state = rng.state_dict()
    >>> first = random.random()
    >>> rng.load_state_dict(state)
    >>> random.random() == first
    True
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["GlobalRNGState"]

_PYTHON_WORDS = 625  # MT19937's 624 words and its position
_NUMPY_WORDS = 624


class GlobalRNGState:
    """Saves and restores Python's, numpy's and torch's global random generators.

    Its state holds tensors and plain values only (numpy's 624 words and Python's 625 as
    int64 tensors), so it is written and read back without code
    (``torch.load(weights_only=True)``). CUDA generators are saved once CUDA is
    initialised in the process; a state holding them loads only where CUDA has as many
    devices.

    Examples:
        >>> import numpy as np, torch
        >>> rng = GlobalRNGState()
        >>> state = rng.state_dict()
        >>> drawn = (np.random.rand(), torch.rand(1).item())
        >>> rng.load_state_dict(state)
        >>> (np.random.rand(), torch.rand(1).item()) == drawn
        True
        >>> sorted(state)
        ['numpy', 'python', 'torch_cpu']
    """

    def state_dict(self) -> dict[str, Any]:
        """The generators' states, as tensors and plain values.

        Examples:
            >>> GlobalRNGState().state_dict()["numpy"]["keys"].shape
            torch.Size([624])
        """
        version, words, gauss_next = random.getstate()
        kind, keys, position, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
        state: dict[str, Any] = {
            "python": {"version": version, "state": torch.tensor(words, dtype=torch.int64), "gauss_next": gauss_next},
            "numpy": {
                "kind": str(kind),
                "keys": torch.from_numpy(keys.astype(np.int64)),  # uint32 words: int64 holds them exactly
                "pos": int(position),
                "has_gauss": int(has_gauss),
                "cached_gaussian": float(cached_gaussian),
            },
            "torch_cpu": torch.get_rng_state(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["torch_cuda"] = list(torch.cuda.get_rng_state_all())
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned; checks it whole first, so that a
        state that does not fit changes no generator.

        Raises:
            ValueError: an entry is missing or malformed (named), or the state holds CUDA
                generators that this process cannot restore.

        Examples:
            >>> GlobalRNGState().load_state_dict({"python": None})
            Traceback (most recent call last):
            ...
            ValueError: GlobalRNGState.load_state_dict: expected the entries ['numpy', 'python', 'torch_cpu'] (and 'torch_cuda'), got ['python'].
        """
        required = {"python", "numpy", "torch_cpu"}
        if not isinstance(state_dict, Mapping) or not required <= set(state_dict) <= required | {"torch_cuda"}:
            found = sorted(map(str, state_dict)) if isinstance(state_dict, Mapping) else type(state_dict).__name__
            raise self._fail(f"expected the entries {sorted(required)} (and 'torch_cuda'), got {found}.")
        python = self._python_state(state_dict["python"])
        numpy_state = self._numpy_state(state_dict["numpy"])
        torch_cpu = self._byte_state(state_dict["torch_cpu"], "'torch_cpu'", torch.get_rng_state().numel())
        torch_cuda = self._cuda_states(state_dict.get("torch_cuda"))
        random.setstate(python)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_cpu)
        if torch_cuda is not None:
            torch.cuda.set_rng_state_all(torch_cuda)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _fail(message: str) -> ValueError:
        return ValueError(f"GlobalRNGState.load_state_dict: {message}")

    def _words(self, value: Any, where: str, count: int, high: int) -> list[int]:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.shape != (count,):
            found = _found(value)
            raise self._fail(f"{where} should be an int64 tensor of shape [{count}], got {found}.")
        words = value.cpu()
        if bool((words < 0).any()) or bool((words > high).any()):
            raise self._fail(f"{where} holds values outside [0, {high}].")
        return words.tolist()

    def _python_state(self, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, Mapping) or set(value) != {"version", "state", "gauss_next"}:
            raise self._fail(f"'python' should be a dict of 'version', 'state' and 'gauss_next', got {value!r:.80}.")
        version, gauss_next = value["version"], value["gauss_next"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise self._fail(f"'python' 'version' should be an int, got {version!r}.")
        if gauss_next is not None and not isinstance(gauss_next, float):
            raise self._fail(f"'python' 'gauss_next' should be None or a float, got {gauss_next!r}.")
        words = self._words(value["state"], "'python' 'state'", _PYTHON_WORDS, 2**32 - 1)
        return version, tuple(words), gauss_next

    def _numpy_state(self, value: Any) -> tuple[Any, ...]:
        fields = {"kind", "keys", "pos", "has_gauss", "cached_gaussian"}
        if not isinstance(value, Mapping) or set(value) != fields:
            raise self._fail(f"'numpy' should be a dict of {sorted(fields)}, got {value!r:.80}.")
        if value["kind"] != "MT19937":
            raise self._fail(f"'numpy' 'kind' should be 'MT19937', got {value['kind']!r}.")
        for name, low, high in (("pos", 0, _NUMPY_WORDS), ("has_gauss", 0, 1)):
            number = value[name]
            if not isinstance(number, int) or isinstance(number, bool) or not low <= number <= high:
                raise self._fail(f"'numpy' {name!r} should be an int in [{low}, {high}], got {number!r}.")
        if not isinstance(value["cached_gaussian"], float):
            raise self._fail(f"'numpy' 'cached_gaussian' should be a float, got {value['cached_gaussian']!r}.")
        keys = np.asarray(self._words(value["keys"], "'numpy' 'keys'", _NUMPY_WORDS, 2**32 - 1), dtype=np.uint32)
        return "MT19937", keys, value["pos"], value["has_gauss"], value["cached_gaussian"]

    def _byte_state(self, value: Any, where: str, size: int) -> torch.Tensor:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.shape != (size,):
            found = _found(value)
            raise self._fail(f"{where} should be a uint8 tensor of shape [{size}], got {found}.")
        return value.cpu()

    def _cuda_states(self, value: Any) -> list[torch.Tensor] | None:
        if value is None:
            return None
        if not isinstance(value, (list, tuple)):
            raise self._fail(f"'torch_cuda' should be a list of generator states, got {type(value).__name__}.")
        if not torch.cuda.is_available():
            raise self._fail(
                f"the state holds {len(value)} CUDA generator state(s), but CUDA is not available here "
                f"(leave the 'rng' component out of the load to resume without them)."
            )
        if len(value) != torch.cuda.device_count():
            raise self._fail(
                f"the state holds {len(value)} CUDA generator state(s), this process sees "
                f"{torch.cuda.device_count()} CUDA device(s)."
            )
        states = []
        for index, item in enumerate(value):
            if not isinstance(item, torch.Tensor) or item.dtype != torch.uint8 or item.dim() != 1:
                raise self._fail(f"'torch_cuda'[{index}] should be a 1-d uint8 tensor, got {item!r:.80}.")
            states.append(item.cpu())
        return states

    def __repr__(self) -> str:
        return "GlobalRNGState()"


def _found(value: Any) -> str:
    """How an error describes a value that should have been a tensor."""
    return f"{value.dtype} of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
