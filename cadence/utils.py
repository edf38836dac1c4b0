"""Public helpers for training scripts: a named timer, the device to use, warm-up compilation.

Scripts written for the reference library import three of its private helpers,
``from torchrl._utils import timeit, get_available_device, compile_with_warmup``
(and sometimes its ``logger``). The same names, with the same meaning, are public here::

    from cadence.utils import compile_with_warmup, get_available_device, logger, timeit

- :class:`timeit` times named blocks (``with timeit("update"): ...`` or as a decorator)
  into one process-wide table, which :meth:`timeit.printevery` prints and
  :meth:`timeit.todict` hands to a metrics logger.
- :func:`get_available_device` returns the accelerator a script should use, or the CPU.
- :func:`compile_with_warmup` runs a function as is for its first calls, then through
  ``torch.compile``; where ``torch.compile`` cannot work (no C++ compiler, a Python that
  TorchDynamo does not support, a backend that fails) it warns once and keeps running
  the function uncompiled.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from typing import Any, Callable, Literal, TypeVar, overload

import torch

__all__ = ["compile_with_warmup", "get_available_device", "logger", "timeit"]

F = TypeVar("F", bound=Callable[..., Any])

# ---------------------------------------------------------------------------------------
# Logger
# ---------------------------------------------------------------------------------------


class _CurrentStdoutHandler(logging.StreamHandler):
    """A stream handler that writes to whatever ``sys.stdout`` is at the time of each record.

    Binding the stream at import would bypass later redirections (pytest's capture,
    doctest, ``contextlib.redirect_stdout``); looking it up per record follows them.
    """

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, value: Any) -> None:
        # StreamHandler.__init__ assigns a stream; the property above always wins
        pass


#: The ``"cadence"`` logger. Like the reference library's, it prints INFO and above to
#: standard output and does not propagate to the root logger, so that a script's progress
#: lines (``logger.info(...)``, :meth:`timeit.print`) show without any logging setup.
#: Silence it with ``logger.setLevel(logging.WARNING)``.
logger = logging.getLogger("cadence")
if not any(isinstance(handler, _CurrentStdoutHandler) for handler in logger.handlers):
    _handler = _CurrentStdoutHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

# ---------------------------------------------------------------------------------------
# timeit
# ---------------------------------------------------------------------------------------


class timeit:  # noqa: N801 (the reference library's name, kept so that scripts switch by one import)
    """A named timer: a context manager and a decorator that add to one process-wide table.

    Every use of a name adds its elapsed seconds to that name's entry; the class methods
    read the table (:meth:`todict`, :meth:`print`, :meth:`printevery`) and clear it
    (:meth:`erase`, :meth:`reset`). Times come from ``time.perf_counter``; recording one
    costs about a microsecond, so timers can stay in a training loop.

    Args:
        name: the entry the time goes to, e.g. ``"collect"`` or ``"rb - sample"``.
        sync: if ``True`` and CUDA is available, synchronize CUDA when the timer starts and
            stops, so that the time covers the queued GPU work rather than only its launch.
            Defaults to ``False``.

    Raises:
        TypeError: if ``name`` is not a str.

    Examples:
        >>> from cadence.utils import timeit
        >>> timeit.reset()
        >>> with timeit("sum"):
        ...     total = sum(range(1000))
        >>> @timeit("square")
        ... def square(x):
        ...     return x * x
        >>> square(3)
        9
        >>> sorted(timeit.todict(prefix="time"))
        ['time/square', 'time/sum']
        >>> timer = timeit("long job").start()
        >>> timer.elapsed() >= 0.0
        True
    """

    __slots__ = ("name", "_sync", "_t0")

    # name -> [total seconds, number of timed calls]; shared by every instance
    _registry: dict[str, list[float]] = {}
    # mark_start() times, by name
    _marks: dict[str, float] = {}
    _lock = threading.Lock()
    _printevery_count = 0

    def __init__(self, name: str, *, sync: bool = False) -> None:
        if not isinstance(name, str):
            raise TypeError(f"timeit: name must be a str, got {type(name).__name__}: {name!r}")
        self.name = name
        # decided once: synchronizing is pointless (and is_available() not free) without CUDA
        self._sync = bool(sync) and torch.cuda.is_available()
        self._t0: float | None = None

    # --------------------------------------------------------------------------- timing

    def __enter__(self) -> timeit:
        if self._sync:
            torch.cuda.synchronize()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if self._sync:
            torch.cuda.synchronize()
        # an exception still counts: the time was spent
        timeit._record(self.name, time.perf_counter() - self._t0)  # type: ignore[operator]

    def __call__(self, fn: F) -> F:
        """Wraps ``fn`` so that each call is timed under this timer's name.

        Each call keeps its own start time, so recursive and concurrent calls of the
        wrapped function are timed correctly.

        Args:
            fn: the function to time.

        Returns:
            A function that calls ``fn`` and records how long it took.

        Raises:
            TypeError: if ``fn`` is not callable.

        Examples:
            >>> timeit.reset()
            >>> @timeit("double")
            ... def double(x):
            ...     return 2 * x
            >>> double(4), double(5)
            (8, 10)
            >>> list(timeit.todict())
            ['double']
        """
        if not callable(fn):
            raise TypeError(f"timeit({self.name!r}) decorates a callable, got {type(fn).__name__}: {fn!r}")
        name = self.name
        sync = self._sync

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if sync:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if sync:
                    torch.cuda.synchronize()
                timeit._record(name, time.perf_counter() - t0)

        return timed  # type: ignore[return-value]

    def start(self) -> timeit:
        """Starts the timer without a ``with`` block, for a long loop or process.

        Nothing is recorded in the table; read the time with :meth:`elapsed`.

        Returns:
            This timer, so that ``timer = timeit("job").start()`` works.

        Examples:
            >>> timer = timeit("warm-up").start()
            >>> isinstance(timer.elapsed(), float)
            True
        """
        if self._sync:
            torch.cuda.synchronize()
        self._t0 = time.perf_counter()
        return self

    def elapsed(self) -> float:
        """Returns the seconds since the timer started (in a ``with`` block or by :meth:`start`).

        Returns:
            The elapsed time in seconds.

        Raises:
            RuntimeError: if the timer has not been started.

        Examples:
            >>> with timeit("io") as timer:
            ...     so_far = timer.elapsed()
            >>> so_far >= 0.0
            True
        """
        if self._t0 is None:
            raise RuntimeError(
                f"timeit({self.name!r}).elapsed(): the timer has not been started; "
                "use it in a `with` block or call .start() first"
            )
        if self._sync:
            torch.cuda.synchronize()
        return time.perf_counter() - self._t0

    @classmethod
    def _record(cls, name: str, seconds: float) -> None:
        with cls._lock:
            entry = cls._registry.get(name)
            if entry is None:
                cls._registry[name] = [seconds, 1]
            else:
                entry[0] += seconds
                entry[1] += 1

    @classmethod
    def mark_start(cls, name: str) -> None:
        """Marks the start of a named event that :meth:`mark_end` closes (in another scope).

        Args:
            name: the table entry the event's time goes to.

        Examples:
            >>> timeit.reset()
            >>> timeit.mark_start("episode")
            >>> timeit.mark_end("episode")
            >>> list(timeit.todict())
            ['episode']
        """
        cls._marks[name] = time.perf_counter()

    @classmethod
    def mark_end(cls, name: str) -> None:
        """Records the time since :meth:`mark_start` was called with the same name.

        Args:
            name: the name given to :meth:`mark_start`.

        Raises:
            KeyError: if no :meth:`mark_start` with this name is pending.

        Examples:
            >>> timeit.mark_start("load")
            >>> timeit.mark_end("load")
            >>> "load" in timeit.todict()
            True
        """
        try:
            t0 = cls._marks.pop(name)
        except KeyError:
            raise KeyError(
                f"timeit.mark_end({name!r}): no pending mark_start({name!r}); "
                f"pending marks: {sorted(cls._marks)}"
            ) from None
        cls._record(name, time.perf_counter() - t0)

    # --------------------------------------------------------------------------- reading

    @classmethod
    def todict(cls, percall: bool = True, prefix: str | None = None) -> dict[str, float]:
        """Returns the table as ``{name: seconds}``, ready for a metrics logger.

        Args:
            percall: if ``True`` (the default), the mean seconds per call since the last
                erase; if ``False``, the total seconds.
            prefix: if given, each key becomes ``f"{prefix}/{name}"``.

        Returns:
            A dict from each name timed since the process started to its time; a name
            not timed since the last :meth:`erase` maps to ``0.0``.

        Examples:
            >>> timeit.reset()
            >>> for _ in range(3):
            ...     with timeit("step"):
            ...         pass
            >>> timings = timeit.todict(prefix="time")
            >>> list(timings), timings["time/step"] >= 0.0
            (['time/step'], True)
            >>> timeit.todict(percall=False)["step"] >= timings["time/step"]
            True
        """
        with cls._lock:
            items = [(name, total, count) for name, (total, count) in cls._registry.items()]
        head = f"{prefix}/" if prefix else ""
        if percall:
            return {f"{head}{name}": (total / count if count else 0.0) for name, total, count in items}
        return {f"{head}{name}": total for name, total, count in items}

    @classmethod
    def print(cls, prefix: str | None = None) -> str:  # noqa: A003 (the reference library's name)
        """Prints one line per name (sorted): the mean time per call, the total and the count.

        The lines go through :data:`logger` (INFO), which prints to standard output.

        Args:
            prefix: if given, starts each line as ``f"{prefix} -- "``.

        Returns:
            The printed lines, joined by newlines (empty if nothing was timed).

        Examples:
            >>> timeit.reset()
            >>> with timeit("fit"):
            ...     pass
            >>> import contextlib, io
            >>> with contextlib.redirect_stdout(io.StringIO()) as out:
            ...     text = timeit.print(prefix="run 1")
            >>> text.startswith("run 1 -- fit took"), "over 1 calls" in out.getvalue()
            (True, True)
        """
        with cls._lock:
            items = sorted((name, total, count) for name, (total, count) in cls._registry.items())
        lines = []
        for name, total, count in items:
            mean = total / count if count else 0.0
            line = (
                f"{name} took {mean * 1000:.4f} msec per call "
                f"(total {total:.4f} sec over {int(count)} calls since the last erase)"
            )
            if prefix:
                line = f"{prefix} -- {line}"
            logger.info(line)
            lines.append(line)
        return "\n".join(lines)

    @classmethod
    def printevery(
        cls,
        num_prints: int,
        total_count: int,
        *,
        prefix: str | None = None,
        erase: bool = False,
    ) -> None:
        """Call once per iteration: prints the table ``num_prints`` times over ``total_count`` calls.

        The table is printed on the first call and then every ``total_count // num_prints``
        calls (every call when ``total_count < num_prints``). The call count is shared by
        the whole process and restarts with :meth:`reset`.

        Args:
            num_prints: how many times to print over the run; ``0`` never prints.
            total_count: how many times this method will be called over the run.
            prefix: passed to :meth:`print`.
            erase: if ``True``, :meth:`erase` the table after each print, so that each
                print covers the calls since the previous one.

        Raises:
            ValueError: if ``num_prints`` or ``total_count`` is negative.

        Examples:
            >>> import contextlib, io
            >>> timeit.reset()
            >>> with contextlib.redirect_stdout(io.StringIO()) as out:
            ...     for _ in range(4):
            ...         timeit.printevery(2, 4, erase=True)  # prints on calls 0 and 2
            ...         with timeit("iteration"):
            ...             pass
            >>> out.getvalue().count("iteration took")  # call 0 had nothing to print yet
            1
        """
        if num_prints < 0 or total_count < 0:
            raise ValueError(
                f"timeit.printevery: num_prints and total_count must be >= 0, "
                f"got num_prints={num_prints!r}, total_count={total_count!r}"
            )
        with cls._lock:
            count = cls._printevery_count
            cls._printevery_count = count + 1
        if num_prints == 0:
            return
        if count % max(1, total_count // num_prints) == 0:
            cls.print(prefix=prefix)
            if erase:
                cls.erase()

    # --------------------------------------------------------------------------- clearing

    @classmethod
    def erase(cls) -> None:
        """Sets every entry's time and count to zero; the names stay (and read as ``0.0``).

        Examples:
            >>> with timeit("tick"):
            ...     pass
            >>> timeit.erase()
            >>> timeit.todict()["tick"]
            0.0
        """
        with cls._lock:
            for entry in cls._registry.values():
                entry[0] = 0.0
                entry[1] = 0

    @classmethod
    def reset(cls) -> None:
        """Starts afresh: forgets every name and pending mark, and restarts :meth:`printevery`'s count.

        Unlike :meth:`erase`, the names are removed, not zeroed.

        Examples:
            >>> with timeit("tock"):
            ...     pass
            >>> timeit.reset()
            >>> timeit.todict()
            {}
        """
        with cls._lock:
            cls._registry.clear()
            cls._marks.clear()
            cls._printevery_count = 0


# ---------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------


@overload
def get_available_device(return_str: Literal[False] = ...) -> torch.device: ...
@overload
def get_available_device(return_str: Literal[True]) -> str: ...
@overload
def get_available_device(return_str: bool) -> torch.device | str: ...


def get_available_device(return_str: bool = False) -> torch.device | str:
    """Returns the first available accelerator, checked in the order CUDA, NPU, MPS, else the CPU.

    PyTorch expects one kind of accelerator per machine; this returns the first one found.
    Scripts use it as a fallback: ``device = cfg.device or get_available_device()``.

    Args:
        return_str: if ``True``, return the device as a string (``"cuda:0"``, ``"npu:0"``,
            ``"mps:0"`` or ``"cpu"``) instead of a ``torch.device``.

    Returns:
        The device, as a ``torch.device`` or (with ``return_str``) a str.

    Examples:
        >>> from cadence.utils import get_available_device
        >>> get_available_device().type in {"cuda", "npu", "mps", "cpu"}
        True
        >>> torch.device(get_available_device(return_str=True)) == get_available_device()
        True
    """
    if torch.cuda.is_available():
        device = "cuda:0"
    elif getattr(torch, "npu", None) is not None and torch.npu.is_available():
        # torch.npu only exists once Ascend's torch_npu plugin is installed
        device = "npu:0"
    elif torch.backends.mps.is_available():
        device = "mps:0"
    else:
        device = "cpu"
    return device if return_str else torch.device(device)


# ---------------------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------------------


def _callable_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _compile_blocker(backend: Any) -> str | None:
    """Says why ``torch.compile`` cannot work here with ``backend``, or None if nothing is known to block it."""
    import torch._dynamo  # noqa: PLC0415 (heavy: imported only when compilation is asked for)

    if not torch._dynamo.is_dynamo_supported():
        return (
            f"torch.compile does not support this Python ({sys.version.split()[0]}) "
            f"with torch {torch.__version__}"
        )
    if backend is None:
        try:
            from torch._dynamo.backends.registry import get_default_backend  # noqa: PLC0415

            backend = get_default_backend()
        except ImportError:
            backend = "inductor"
    if backend == "inductor":
        # Inductor builds its kernels with a C++ compiler; it takes CXX, else g++ (clang++ on macOS, cl on Windows)
        if sys.platform == "win32":
            compiler = os.environ.get("CXX", "cl")
        else:
            compiler = os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")
        if shutil.which(compiler) is None:
            return f"the inductor backend needs a C++ compiler and {compiler!r} was not found (set CXX to one)"
    return None


def _skip_warning(name: str, reason: str) -> str:
    return f"compile_with_warmup: torch.compile skipped for {name!r}: {reason}; it runs uncompiled"


@overload
def compile_with_warmup(model: None = ..., *, warmup: int = ..., **compile_kwargs: Any) -> Callable[[F], F]: ...
@overload
def compile_with_warmup(model: F, *, warmup: int = ..., **compile_kwargs: Any) -> F: ...


def compile_with_warmup(
    model: Callable[..., Any] | None = None, *, warmup: int = 1, **compile_kwargs: Any
) -> Callable[..., Any]:
    """Runs ``model`` as is for its first ``warmup`` calls, then through ``torch.compile``.

    Warm-up calls let lazy initialisation (lazy modules, optimizer state, first-batch
    shapes) happen eagerly before TorchDynamo traces the function. Called without a model,
    it returns a decorator: ``@compile_with_warmup(mode="reduce-overhead", warmup=2)``.

    Where ``torch.compile`` cannot work, the function keeps running uncompiled and ONE
    ``UserWarning`` names the function and the reason, never an error:

    - checked here: a Python that TorchDynamo does not support, or (for the default
      ``"inductor"`` backend) no C++ compiler (``$CXX``, else ``g++``): ``model`` itself
      is returned;
    - at the first compiled call: the backend failing to compile
      (``torch._dynamo.exc.BackendCompilerFailed``, e.g. a broken toolchain). The call is
      run again uncompiled, as are all later ones. TorchDynamo compiles a frame before
      running it, so the failed attempt ran nothing of the frame it failed on.

    With ``fullgraph=True``, a function that cannot be traced as one graph (TorchDynamo's
    ``Unsupported``: e.g. Cadence's exploration modules draw their noise from their own
    ``torch.Generator``, which TorchDynamo does not trace) is compiled with graph breaks
    instead, and a ``UserWarning`` says why.

    Errors of the function itself, and of later recompilations, propagate as usual.

    Args:
        model: the function or ``torch.nn.Module`` to compile; ``None`` returns a decorator.
        warmup: how many calls run uncompiled before compiling. Defaults to 1.
        **compile_kwargs: passed to ``torch.compile`` (``mode``, ``backend``, ``fullgraph``,
            ``dynamic``, ``options``...).

    Returns:
        A function that calls ``model`` (uncompiled during the warm-up, compiled after),
        or ``model`` itself where compilation is skipped; without ``model``, a decorator.

    Raises:
        TypeError: if ``model`` is not callable, or ``warmup`` is not an int.
        ValueError: if ``warmup`` is negative.

    Examples:
        >>> import torch
        >>> from cadence.utils import compile_with_warmup
        >>> graphs = []
        >>> def backend(graph_module, example_inputs):  # a custom torch.compile backend
        ...     graphs.append(graph_module)
        ...     return graph_module.forward
        >>> def affine(x):
        ...     return 2 * x + 1
        >>> fast_affine = compile_with_warmup(affine, backend=backend, warmup=2)
        >>> [fast_affine(torch.tensor(float(i))).item() for i in range(3)]
        [1.0, 3.0, 5.0]
        >>> len(graphs)  # calls 0 and 1 ran uncompiled; call 2 compiled
        1
        >>> @compile_with_warmup(backend="eager", warmup=0)
        ... def square(x):
        ...     return x * x
        >>> square(torch.tensor(3.0))
        tensor(9.)
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(f"compile_with_warmup: warmup must be an int, got {type(warmup).__name__}: {warmup!r}")
    if warmup < 0:
        raise ValueError(f"compile_with_warmup: warmup must be >= 0, got {warmup}")
    if model is None:
        return functools.partial(compile_with_warmup, warmup=warmup, **compile_kwargs)
    if not callable(model):
        raise TypeError(
            f"compile_with_warmup: model must be a callable (function or torch.nn.Module), "
            f"got {type(model).__name__}: {model!r}"
        )
    name = _callable_name(model)
    reason = _compile_blocker(compile_kwargs.get("backend"))
    if reason is not None:
        warnings.warn(_skip_warning(name, reason), UserWarning, stacklevel=2)
        return model

    from torch._dynamo.exc import BackendCompilerFailed, Unsupported  # noqa: PLC0415

    # torch.compile only wraps here (tracing waits for the first compiled call), and it
    # checks its arguments now, so a bad mode/options pair fails at construction
    compiled = torch.compile(model, **compile_kwargs)
    calls = 0
    # compiled once the warm-up is over, until the first compiled call fails to compile
    target: Callable[..., Any] = compiled

    def uncompiled_from_now(error: Exception, *args: Any, **kwargs: Any) -> Any:
        nonlocal target
        warnings.warn(
            _skip_warning(name, f"the backend failed to compile it ({_first_lines(error)})"), UserWarning, stacklevel=3
        )
        target = model
        return model(*args, **kwargs)

    @functools.wraps(model, updated=())
    def run(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls, target
        calls += 1
        if calls <= warmup:
            return model(*args, **kwargs)
        if calls > warmup + 1:
            return target(*args, **kwargs)
        try:
            return compiled(*args, **kwargs)
        except Unsupported as error:
            if not compile_kwargs.get("fullgraph"):
                raise
            # with fullgraph=True TorchDynamo traces the whole call before running any of it
            warnings.warn(
                f"compile_with_warmup: {name!r} cannot be compiled as one graph (fullgraph=True: "
                f"{_first_lines(error)}); it is compiled with graph breaks instead",
                UserWarning,
                stacklevel=2,
            )
            target = torch.compile(model, **{**compile_kwargs, "fullgraph": False})
        except BackendCompilerFailed as error:
            return uncompiled_from_now(error, *args, **kwargs)
        try:
            return target(*args, **kwargs)
        except BackendCompilerFailed as error:
            return uncompiled_from_now(error, *args, **kwargs)

    return run


def _first_lines(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return " ".join(lines[:2]) if lines else type(error).__name__
