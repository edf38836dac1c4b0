"""What the interop layers' base classes share: a subclass must write the contract's methods.

DI-engine's ``BaseEnv``, RLlib's ``Policy`` and ``SampleCollector`` leave some methods to
each subclass. Rather than abstract base classes (a metaclass), each base checks, from
``__init_subclass__``, that a concrete subclass defines them, and names what is missing.

Examples:
    >>> class Base:
    ...     def __init_subclass__(cls, abstract: bool = False, **kwargs):
    ...         super().__init_subclass__(**kwargs)
    ...         if not abstract:
    ...             require_methods(cls, Base, ("run",))
    ...     def run(self) -> None: ...
    >>> class Missing(Base):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: Missing must define run() (Base's contract); declare `class Missing(Base, abstract=True)` for a base class
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["require_methods"]


def require_methods(cls: type, base: type, required: Sequence[str]) -> None:
    """Refuses ``cls`` if it still has ``base``'s version of a method in ``required`` (or none).

    Args:
        cls: the subclass being defined.
        base: the base class whose contract it follows.
        required: the methods each concrete subclass writes itself.

    Raises:
        TypeError: naming the missing methods, and the ``abstract=True`` escape.

    Examples:
        >>> class Base:
        ...     def step(self) -> None: ...
        >>> class Concrete(Base):
        ...     def step(self) -> None: ...
        >>> require_methods(Concrete, Base, ("step",))
    """
    # absent from both (a contract the base only documents) counts as missing too
    missing = [name for name in required if getattr(cls, name, None) is getattr(base, name, None)]
    if missing:
        names = ", ".join(f"{name}()" for name in missing)
        raise TypeError(
            f"{cls.__name__} must define {names} ({base.__name__}'s contract); "
            f"declare `class {cls.__name__}({base.__name__}, abstract=True)` for a base class"
        )
