"""Wrappers around third-party simulators, one module per library.

This package itself only says which libraries can be used here
(:func:`get_available_libraries`). The gym-like backend in use is chosen in
:mod:`cadence.envs.libs.gym_backend` (``gym_backend``, ``set_gym_backend``, also importable
from ``cadence.envs.libs.gym``); the wrappers live in the submodules
(``cadence.envs.libs.gym``, ``cadence.envs.libs.dm_control``, ...).
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["SUPPORTED_LIBRARIES", "get_available_libraries"]

#: library name -> the top-level module that it is imported as, for every library that has a
#: wrapper here (``cadence.envs.libs.<module>``)
SUPPORTED_LIBRARIES: dict[str, str] = {
    "gymnasium": "gymnasium",
    "gym": "gym",
    "mo_gymnasium": "mo_gymnasium",
    "dm_control": "dm_control",
    "pettingzoo": "pettingzoo",
    "vmas": "vmas",
    "envpool": "envpool",
    "brax": "brax",
    "jumanji": "jumanji",
    "open_spiel": "pyspiel",
    "openml": "openml",
    "meltingpot": "meltingpot",
}


def _importable(module_name: str) -> bool:
    if module_name in sys.modules:
        return sys.modules[module_name] is not None
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


def get_available_libraries() -> dict[str, bool]:
    """Returns all the supported libraries, each with whether it can be imported here.

    Nothing is imported: each library's module is looked up with
    :func:`importlib.util.find_spec` (a module already in ``sys.modules`` counts as
    available, one blocked there with ``None`` does not). ``gymnasium`` is a dependency of
    Cadence, so it is always available after a normal install.

    Returns:
        A mapping from library name (``"gymnasium"``, ``"gym"``, ``"dm_control"``,
        ``"pettingzoo"``, ``"vmas"``, ``"envpool"``, ``"brax"``, ``"jumanji"``, ...; see
        :data:`SUPPORTED_LIBRARIES` for the module each one is imported as) to ``True`` if
        it is installed.

    Examples:
        >>> libraries = get_available_libraries()
        >>> libraries["gymnasium"]
        True
        >>> sorted(libraries) == sorted(SUPPORTED_LIBRARIES)
        True
        >>> [name for name, ok in libraries.items() if ok]  # doctest: +SKIP
        ['gymnasium']
    """
    return {name: _importable(module) for name, module in SUPPORTED_LIBRARIES.items()}
