"""Small internal helpers shared across Cadence.

The main piece here is :class:`implement_for`, which lets one name carry several
implementations, each valid for a range of versions of some third-party module
(``gym``, ``gymnasium``, ...). The right implementation is picked when the name is
called, from the version that is installed (or already imported) at that moment.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from packaging.version import InvalidVersion, Version

__all__ = ["MAX_QUOTED", "ClassProperty", "implement_for", "parse_version", "module_version", "quoted"]

F = TypeVar("F", bound=Callable[..., Any])

# ---------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------


def parse_version(version: str) -> Version:
    """Parses a PEP 440 version string into an object that compares as versions do.

    Args:
        version: the version string, e.g. ``"0.26.2"``, ``"2.13.0+cpu"``, ``"1.0rc1"``.

    Returns:
        A ``packaging.version.Version``.

    Raises:
        ValueError: if ``version`` is not a version string.

    Examples:
        >>> parse_version("0.26.2") > parse_version("0.26.0")
        True
        >>> parse_version("1.0.dev1") < parse_version("1.0a1") < parse_version("1.0")
        True
    """
    if not isinstance(version, str):
        raise TypeError(f"a version must be a str, got {type(version).__name__}: {version!r}")
    try:
        return Version(version)
    except InvalidVersion as err:
        raise ValueError(f"{version!r} is not a valid version string (expected e.g. '1.2.3')") from err


_NOT_INSTALLED = object()
_UNKNOWN = "unknown"
# module name -> (the sys.modules entry it was read from, the version found)
_version_cache: dict[str, tuple[Any, Any]] = {}


def module_version(module_name: str) -> str | None:
    """Returns the version of a module as Cadence sees it, without importing it if possible.

    A module already in ``sys.modules`` reports its ``__version__`` (so that a stand-in
    module placed there, as tests do, is believed); otherwise the installed distribution's
    metadata is read. A module that is installed but carries no version gives
    ``"unknown"``.

    Args:
        module_name: the import name, e.g. ``"gymnasium"`` (a dotted name uses its top level).

    Returns:
        The version string, or ``None`` if the module is not installed.

    Examples:
        >>> import sys, types
        >>> from unittest import mock
        >>> with mock.patch.dict(sys.modules, fakelib=types.SimpleNamespace(__version__="1.2.3")):
        ...     module_version("fakelib")
        '1.2.3'
        >>> module_version("surely_not_an_installed_module") is None
        True
    """
    version = _lookup_version(module_name.partition(".")[0])
    return None if version is _NOT_INSTALLED else version


def _lookup_version(name: str) -> Any:
    loaded = sys.modules.get(name, _NOT_INSTALLED)
    cached = _version_cache.get(name)
    if cached is not None and cached[0] is loaded:
        return cached[1]
    version = _read_version(name, loaded)
    _version_cache[name] = (loaded, version)
    return version


def _read_version(name: str, loaded: Any) -> Any:
    if loaded is None:  # an import that was blocked on purpose
        return _NOT_INSTALLED
    if loaded is not _NOT_INSTALLED:
        version = getattr(loaded, "__version__", None)
        if isinstance(version, str):
            return version
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pass
    for dist in importlib.metadata.packages_distributions().get(name, ()):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    if loaded is not _NOT_INSTALLED:
        return _UNKNOWN
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return _NOT_INSTALLED
    # installed without metadata (e.g. on sys.path by hand): the module itself may know
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken install counts as not installed
        return _NOT_INSTALLED
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else _UNKNOWN


# ---------------------------------------------------------------------------------------
# implement_for
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Implementation:
    module_name: str
    from_version: str | None
    to_version: str | None
    lower: Version | None
    upper: Version | None
    func: Callable[..., Any]

    def accepts(self, version: str) -> bool:
        try:
            key = parse_version(version)
        except ValueError:
            return False
        return (self.lower is None or key >= self.lower) and (self.upper is None or key < self.upper)

    def describe(self) -> str:
        return f"{self.module_name} [{self.from_version or '-inf'}, {self.to_version or 'inf'})"


class _Dispatch:
    """Every implementation registered under one qualified name, and the one now chosen."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname
        self.implementations: list[_Implementation] = []
        self.module_names: tuple[str, ...] = ()
        self.wrapper: Callable[..., Any] | None = None
        # (generation, the (name, sys.modules entry) pairs it was chosen from, function)
        self.cached: tuple[int, tuple[tuple[str, Any], ...], Callable[..., Any]] | None = None

    def add(self, impl: _Implementation) -> None:
        same_range = [
            i
            for i, old in enumerate(self.implementations)
            if (old.module_name, old.from_version, old.to_version)
            == (impl.module_name, impl.from_version, impl.to_version)
        ]
        if same_range:  # a redefinition (re-run cell, reloaded module) replaces the old one
            self.implementations[same_range[0]] = impl
        else:
            self.implementations.append(impl)
        self.module_names = tuple(
            dict.fromkeys(i.module_name.partition(".")[0] for i in self.implementations)
        )
        self.cached = None

    def resolve(self) -> Callable[..., Any]:
        cached = self.cached
        if cached is not None and cached[0] == implement_for._generation:
            get = sys.modules.get
            for name, seen in cached[1]:
                if get(name, _NOT_INSTALLED) is not seen:
                    break
            else:
                return cached[2]
        snapshot = tuple((name, sys.modules.get(name, _NOT_INSTALLED)) for name in self.module_names)
        func = self._choose()
        self.cached = (implement_for._generation, snapshot, func)
        return func

    def _choose(self) -> Callable[..., Any]:
        matches = []
        for impl in self.implementations:
            version = _lookup_version(impl.module_name.partition(".")[0])
            if version is not _NOT_INSTALLED and impl.accepts(version):
                matches.append(impl)
        if not matches:
            raise self._no_match_error()
        if len({impl.module_name for impl in matches}) > 1:
            preferred = _preferred_module_names()
            for impl in matches:
                if impl.module_name in preferred:
                    return impl.func
        return matches[0].func

    def _no_match_error(self) -> ImportError:
        found = []
        any_installed = False
        for name in self.module_names:
            version = _lookup_version(name)
            if version is _NOT_INSTALLED:
                found.append(f"{name} is not installed")
            else:
                any_installed = True
                found.append(f"{name} {version} is installed")
        ranges = ", ".join(impl.describe() for impl in self.implementations)
        message = (
            f"{self.qualname}() has no implementation for the installed versions "
            f"({'; '.join(found)}); implementations exist for: {ranges}."
        )
        error_type = ImportError if any_installed else ModuleNotFoundError
        return error_type(message, name=self.module_names[0])


def _preferred_module_names() -> tuple[str, ...]:
    """Module names to favour when implementations for several modules all fit."""
    gym_backend_module = sys.modules.get("cadence.envs.libs.gym_backend")
    if gym_backend_module is None:
        return ()
    try:
        return (gym_backend_module.gym_backend().__name__,)
    except ImportError:
        return ()


class implement_for:  # noqa: N801 - the lower-case name is the public API
    """Registers one implementation of a function for a range of versions of a module.

    Several functions with the same qualified name (``module.Class.method`` or
    ``module.function``) decorated with different ranges share one dispatching wrapper.
    Calling it runs the implementation whose range ``[from_version, to_version)`` contains
    the version of ``module_name`` found at call time: the ``__version__`` of the module if
    it is already imported (in ``sys.modules``), otherwise the installed distribution's
    version. The choice is cached until the module in ``sys.modules`` changes or
    :meth:`reset` is called, so the wrapper costs one call and a dictionary look-up.

    When implementations for different modules all fit (for example ``gym`` and
    ``gymnasium`` are both installed), the one for the current gym backend
    (:func:`cadence.envs.libs.gym_backend.gym_backend`) wins; otherwise the first
    registered.

    Calling a name for which no range fits raises :class:`ImportError`
    (:class:`ModuleNotFoundError` when none of the modules is installed) that names the
    modules, their installed versions and the ranges available.

    Args:
        module_name: the import name of the module whose version decides, e.g. ``"gym"``.
        from_version: the first version this implementation supports (inclusive);
            ``None`` means no lower bound.
        to_version: the first version it no longer supports (exclusive); ``None`` means no
            upper bound.

    Raises:
        ValueError: if a bound is not a version string or ``from_version >= to_version``.

    Examples:
        >>> @implement_for("gym", None, "0.26.0")
        ... def fun():
        ...     return 0
        >>> @implement_for("gym", "0.26.0", None)
        ... def fun():
        ...     return 1

        With gym 0.26.2 installed (here a stand-in placed in ``sys.modules``):

        >>> import sys, types
        >>> from unittest import mock
        >>> with mock.patch.dict(sys.modules, gym=types.SimpleNamespace(__version__="0.26.2")):
        ...     fun()
        1

        Methods work the same way:

        >>> class Reader:
        ...     @implement_for("gymnasium", None, "1.0")
        ...     def api(self):
        ...         return "old"
        ...     @implement_for("gymnasium", "1.0")
        ...     def api(self):
        ...         return "new"
        >>> Reader().api()
        'new'
    """

    # bumped by :meth:`reset` and by ``set_gym_backend`` to drop every cached choice
    _generation: int = 0
    _registry: dict[str, _Dispatch] = {}

    def __init__(
        self,
        module_name: str,
        from_version: str | None = None,
        to_version: str | None = None,
    ) -> None:
        if not isinstance(module_name, str) or not module_name:
            raise TypeError(f"module_name must be a non-empty str, got {module_name!r}")
        lower = None if from_version is None else parse_version(from_version)
        upper = None if to_version is None else parse_version(to_version)
        if lower is not None and upper is not None and lower >= upper:
            raise ValueError(
                f"implement_for({module_name!r}, {from_version!r}, {to_version!r}): "
                "from_version must be lower than to_version"
            )
        self.module_name = module_name
        self.from_version = from_version
        self.to_version = to_version
        self._lower = lower
        self._upper = upper

    def __repr__(self) -> str:
        return (
            f"implement_for({self.module_name!r}, {self.from_version!r}, {self.to_version!r})"
        )

    def __call__(self, func: F) -> F:
        """Registers ``func`` and returns the dispatcher for its qualified name.

        Args:
            func: a function, method, ``classmethod`` or ``staticmethod``.

        Returns:
            The wrapper shared by every implementation of that name (wrapped in the same
            ``classmethod``/``staticmethod`` as ``func`` was).

        Examples:
            >>> impl = implement_for("gymnasium", "0.1")
            >>> def version_family():
            ...     return "gymnasium"
            >>> version_family = impl(version_family)
            >>> version_family()
            'gymnasium'
        """
        method_type = type(func) if isinstance(func, (classmethod, staticmethod)) else None
        target = func.__func__ if method_type is not None else func
        if not callable(target):
            raise TypeError(f"implement_for decorates functions, got {func!r}")
        qualname = f"{getattr(target, '__module__', None)}.{getattr(target, '__qualname__', repr(target))}"
        dispatch = self._registry.get(qualname)
        if dispatch is None:
            dispatch = self._registry[qualname] = _Dispatch(qualname)
        dispatch.add(
            _Implementation(
                self.module_name, self.from_version, self.to_version, self._lower, self._upper, target
            )
        )
        if dispatch.wrapper is None:
            dispatch.wrapper = _make_wrapper(dispatch, target)
        wrapper = dispatch.wrapper
        return method_type(wrapper) if method_type is not None else wrapper  # type: ignore[return-value]

    @classmethod
    def reset(cls) -> None:
        """Forgets every cached version and choice, so that the next call looks again.

        Needed only when a version changes under the same module object (an upgrade in a
        running process, a test editing a stand-in's ``__version__``): replacing the module
        in ``sys.modules`` is noticed without it.

        Examples:
            >>> implement_for.reset()
        """
        _version_cache.clear()
        cls._invalidate()

    @classmethod
    def _invalidate(cls) -> None:
        """Drops the cached choices (not the versions), e.g. when the gym backend changes."""
        cls._generation += 1

    @classmethod
    def implementations(cls, func: Callable[..., Any]) -> list[tuple[str, str | None, str | None]]:
        """Lists the ``(module_name, from_version, to_version)`` ranges registered for ``func``.

        Args:
            func: a wrapper returned by ``implement_for``.

        Returns:
            The ranges, in registration order.

        Raises:
            TypeError: if ``func`` was not made by ``implement_for``.

        Examples:
            >>> @implement_for("gymnasium", None, "1.0")
            ... def step_api():
            ...     return 4
            >>> @implement_for("gymnasium", "1.0")
            ... def step_api():
            ...     return 5
            >>> implement_for.implementations(step_api)
            [('gymnasium', None, '1.0'), ('gymnasium', '1.0', None)]
        """
        dispatch = getattr(func, "_implement_for_dispatch", None)
        if dispatch is None:
            raise TypeError(f"{func!r} was not decorated with implement_for")
        return [(i.module_name, i.from_version, i.to_version) for i in dispatch.implementations]


def _make_wrapper(dispatch: _Dispatch, first: Callable[..., Any]) -> Callable[..., Any]:
    resolve = dispatch.resolve

    @functools.wraps(first)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return resolve()(*args, **kwargs)

    # functools.wraps points __wrapped__ at one implementation; signature tools would then
    # describe that one only, and doctest would find its docstring twice
    del wrapper.__wrapped__
    wrapper._implement_for_dispatch = dispatch  # type: ignore[attr-defined]
    return wrapper


class ClassProperty:
    """A read-only property computed on the class, so that it reads without an instance.

    Args:
        getter: called with the class (the owner) on every read.

    Examples:
        >>> class Catalogue:
        ...     names = ClassProperty(lambda cls: [cls.__name__.lower()])
        >>> Catalogue.names, Catalogue().names
        (['catalogue'], ['catalogue'])
    """

    def __init__(self, getter: Callable[[type], Any]) -> None:
        self._getter = getter

    def __get__(self, instance: Any, owner: type) -> Any:
        return self._getter(owner)


#: the most characters of any one input value that an error message quotes
MAX_QUOTED = 200


def quoted(value: Any, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters.

    Errors quote what they were given, and what they were given may be huge (a 5 MB env
    name, a config value expanded from YAML aliases): the message keeps its head and says
    how long the whole was. Containers are cut before they are fully rendered, so quoting
    costs no more than ``limit`` characters of work however large ``value`` is.

    Args:
        value: what to quote.
        limit: the most characters of ``value``'s ``repr`` to keep.

    Returns:
        The ``repr``, or its first ``limit`` characters followed by how long it was.

    Examples:
        >>> quoted("Pendulum-v1")
        "'Pendulum-v1'"
        >>> quoted("x" * 10_000, limit=12)
        "'xxxxxxxxxxx... (10000 characters)"
        >>> quoted(list(range(10**6)), limit=20)
        '[0, 1, 2, 3, 4, 5, 6... (a list of 1000000 items)'
    """
    if isinstance(value, (str, bytes)):
        text = repr(value[: limit + 1])
        if len(value) <= limit:
            return text
        return f"{text[:limit]}... ({len(value)} characters)"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        # render only the items that fit: repr of a YAML alias bomb would never finish
        parts: list[str] = []
        size = 0
        items = value.items() if isinstance(value, dict) else value
        for item in items:
            part = f"{quoted(item[0], limit)}: {quoted(item[1], limit)}" if isinstance(value, dict) else quoted(
                item, limit
            )
            parts.append(part)
            size += len(part) + 2
            if size > limit:
                break
        opening, closing = {list: "[]", tuple: "()", dict: "{}"}.get(type(value), "{}")
        text = opening + ", ".join(parts) + closing
        if size <= limit:
            return text
        return f"{text[:limit]}... (a {type(value).__name__} of {len(value)} items)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
