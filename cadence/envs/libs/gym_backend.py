"""Which gym-like library (``gymnasium`` or the older ``gym``) Cadence talks to.

Both libraries can be installed side by side. :func:`gym_backend` returns the one in use
(by default ``gymnasium`` when it is installed, else ``gym``); :class:`set_gym_backend`
changes it for the duration of a ``with`` block or of a decorated function. The state is a
plain per-process stack: entering pushes, leaving pops, so nested blocks restore the outer
choice. Worker processes start from the default; pass the backend explicitly there if you
need another one.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable, TypeVar

from cadence._utils import implement_for

__all__ = ["gym_backend", "set_gym_backend"]

F = TypeVar("F", bound=Callable[..., Any])

#: the backends Cadence knows, in order of preference for the default
KNOWN_BACKENDS: tuple[str, ...] = ("gymnasium", "gym")

# the stack of backends set by ``set_gym_backend`` (innermost last)
_stack: list[ModuleType] = []
_default: list[ModuleType] = []  # the default backend, once imported


def _install_hint(name: str) -> str:
    if name in KNOWN_BACKENDS:
        return f"pip install {name}"
    return f"pip install gymnasium (known gym backends: {', '.join(KNOWN_BACKENDS)})"


def _import_backend(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and err.name != name.partition(".")[0]:
            raise  # the backend is there but one of its own dependencies is missing
        raise ModuleNotFoundError(
            f"the gym backend {name!r} is not installed; install it with: {_install_hint(name)}",
            name=name,
        ) from None


def _default_backend() -> ModuleType:
    if _default:
        return _default[0]
    for name in KNOWN_BACKENDS:
        if name in sys.modules and sys.modules[name] is not None:
            found = True
        else:
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
        if found:
            _default.append(_import_backend(name))
            return _default[0]
    raise ModuleNotFoundError(
        "no gym backend is installed; install one with: pip install gymnasium",
        name="gymnasium",
    )


def gym_backend(submodule: str | None = None) -> Any:
    """Returns the gym backend in use, or one of its submodules.

    The backend is the innermost one set with :class:`set_gym_backend`, or by default
    ``gymnasium`` when it is installed, else ``gym``.

    Args:
        submodule: an optional dotted name inside the backend, e.g. ``"wrappers"`` or
            ``"envs.classic_control"``; it is imported if needed. Attributes that are not
            modules (``"spaces.Box"``) are returned too.

    Returns:
        The backend module, or ``backend.<submodule>``.

    Raises:
        ModuleNotFoundError: if no backend is installed (the message says what to install).
        AttributeError: if the backend has no such submodule or attribute.

    Examples:
        >>> import gymnasium
        >>> gym_backend() is gymnasium
        True
        >>> gym_backend("wrappers").__name__
        'gymnasium.wrappers'
        >>> gym_backend("spaces.Box") is gymnasium.spaces.Box
        True
    """
    backend = _stack[-1] if _stack else _default_backend()
    if submodule is None:
        return backend
    if not isinstance(submodule, str) or not submodule:
        raise TypeError(f"submodule must be a non-empty str, got {submodule!r}")
    return _resolve_submodule(backend, submodule)


def _resolve_submodule(backend: Any, submodule: str) -> Any:
    obj = backend
    path = getattr(backend, "__name__", repr(backend))
    for part in submodule.split("."):
        path = f"{path}.{part}"
        try:
            obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        try:
            obj = importlib.import_module(path)
        except ModuleNotFoundError as err:
            missing = err.name or path
            if missing != path and not path.startswith(f"{missing}."):
                raise  # the submodule exists but one of its own dependencies is missing
            raise AttributeError(
                f"the gym backend {getattr(backend, '__name__', backend)!r} has no "
                f"submodule or attribute {submodule!r} ({path} not found)"
            ) from None
    return obj


class set_gym_backend:  # noqa: N801 - the lower-case name is the public API
    """Sets the gym backend, as a context manager or as a function decorator.

    The backend is imported when ``set_gym_backend`` is created, so asking for one that is
    not installed fails at once with a message that says what to install. Entering pushes
    it on a per-process stack and leaving pops it, so nested uses restore the outer
    backend, also when the block raises. Functions decorated with
    :class:`cadence._utils.implement_for` for both ``gym`` and ``gymnasium`` follow the
    backend in use.

    Args:
        backend: a module (``gymnasium``, ``gym``, or any gym-like stand-in) or its import
            name (``"gymnasium"``, ``"gym"``).

    Raises:
        ModuleNotFoundError: if ``backend`` names a module that is not installed.
        TypeError: if ``backend`` is neither a module nor a str.

    Examples:
        >>> import gymnasium
        >>> with set_gym_backend(gymnasium):
        ...     print(gym_backend().__name__)
        gymnasium
        >>> with set_gym_backend("gymnasium"):
        ...     print(gym_backend("wrappers").__name__)
        gymnasium.wrappers

        As a decorator:

        >>> @set_gym_backend("gymnasium")
        ... def backend_name():
        ...     return gym_backend().__name__
        >>> backend_name()
        'gymnasium'

        A backend that is not installed:

        >>> set_gym_backend("surely_not_a_gym")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ModuleNotFoundError: the gym backend 'surely_not_a_gym' is not installed; ...
    """

    def __init__(self, backend: ModuleType | str) -> None:
        if isinstance(backend, str):
            module = _import_backend(backend)
        elif isinstance(backend, ModuleType):
            module = backend
        else:
            raise TypeError(
                "set_gym_backend expects a module or a module name such as 'gymnasium', "
                f"got {type(backend).__name__}: {backend!r}"
            )
        self.backend: ModuleType = module
        self._depths: list[int] = []  # stack sizes at each (possibly nested) entry

    def __repr__(self) -> str:
        return f"set_gym_backend({getattr(self.backend, '__name__', self.backend)!r})"

    def __enter__(self) -> ModuleType:
        self._depths.append(len(_stack))
        _stack.append(self.backend)
        implement_for._invalidate()
        return self.backend

    def __exit__(self, *exc_info: object) -> None:
        del _stack[self._depths.pop() :]
        implement_for._invalidate()

    def __call__(self, func: F) -> F:
        """Decorates ``func`` so that it runs with this backend.

        Args:
            func: the function to wrap.

        Returns:
            A function that enters this backend around each call of ``func``.

        Examples:
            >>> import gymnasium
            >>> show = set_gym_backend(gymnasium)(lambda: gym_backend().__name__)
            >>> show()
            'gymnasium'
        """

        @functools.wraps(func)
        def with_backend(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return with_backend  # type: ignore[return-value]
