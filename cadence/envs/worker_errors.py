"""The errors of worker processes, each naming the worker: ``WorkerError`` and its kinds,
and ``RemoteError``, the form in which a child sends its exception to the parent.

Examples:
    >>> from cadence.envs.worker_errors import WorkerDiedError, WorkerError
    >>> issubclass(WorkerDiedError, WorkerError)
    True
"""

from __future__ import annotations

import pickle
import traceback

__all__ = ["RemoteError", "WorkerDiedError", "WorkerError", "WorkerException", "WorkerTimeoutError"]

_PROTOCOL = pickle.HIGHEST_PROTOCOL

class WorkerError(RuntimeError):
    """Base class of the errors of a worker process; ``index`` names the worker.

    When several workers fail in one call, the pool raises the first failure; the others
    are in its ``others`` (and in its notes), so that a caller can deal with each.

    Args:
        message: the error message.
        index: the index of the worker in its pool (``-1`` when unknown).

    Examples:
        >>> err = WorkerError("worker 2 failed", index=2)
        >>> err.index, isinstance(err, RuntimeError), err.others
        (2, True, ())
    """

    def __init__(self, message: str, index: int = -1) -> None:
        super().__init__(message)
        self.index = index
        self.others: tuple[WorkerError, ...] = ()


class WorkerException(WorkerError):
    """The worker's object raised; the message holds the child's traceback.

    The worker is still running and usable after this error.

    Args:
        message: the error message (it names the worker, the method and the traceback).
        index: the index of the worker.
        method: the method that raised (``"get_attr"`` for :meth:`WorkerPool.get_attr`,
            ``"factory"`` when the factory raised at start).
        remote_traceback: the traceback text, as the child formatted it.
        remote_exception: the child's exception, when it could be pickled, else ``None``.
            It is also this error's ``__cause__``.

    Examples:
        >>> err = WorkerException("worker 0 raised", index=0, method="step")
        >>> err.method, err.remote_exception is None
        ('step', True)
    """

    def __init__(
        self,
        message: str,
        index: int = -1,
        method: str = "",
        remote_traceback: str = "",
        remote_exception: BaseException | None = None,
    ) -> None:
        super().__init__(message, index)
        self.method = method
        self.remote_traceback = remote_traceback
        self.remote_exception = remote_exception


class WorkerDiedError(WorkerError):
    """The worker's process is gone (killed, crashed, exited, or killed after a timeout).

    Calls to that worker keep raising this error until :meth:`WorkerPool.restart`.

    Args:
        message: the error message (it names the worker and how it ended).
        index: the index of the worker.
        exitcode: the process's exit code (``-N`` for signal N), ``None`` if unknown.

    Examples:
        >>> err = WorkerDiedError("worker 1 died", index=1, exitcode=-9)
        >>> err.exitcode
        -9
    """

    def __init__(self, message: str, index: int = -1, exitcode: int | None = None) -> None:
        super().__init__(message, index)
        self.exitcode = exitcode


class WorkerTimeoutError(WorkerError):
    """The worker gave no reply within the pool's timeout; the pool killed it.

    Args:
        message: the error message (it names the worker, the method and the timeout).
        index: the index of the worker.
        method: the method that got no reply.
        timeout: the timeout in seconds.

    Examples:
        >>> err = WorkerTimeoutError("no reply", index=0, method="step", timeout=0.5)
        >>> err.timeout
        0.5
    """

    def __init__(self, message: str, index: int = -1, method: str = "", timeout: float | None = None) -> None:
        super().__init__(message, index)
        self.method = method
        self.timeout = timeout


class RemoteError:
    """An exception raised in a worker, as it travels to the parent."""

    def __init__(self, err: BaseException) -> None:
        self.type_name = type(err).__qualname__
        self.message = str(err)
        self.traceback = "".join(traceback.format_exception(err))
        try:
            self.pickled: bytes | None = pickle.dumps(err, protocol=_PROTOCOL)
        except Exception:  # exceptions holding locks, sockets, local classes...
            self.pickled = None

    def exception(self) -> BaseException | None:
        """The original exception, rebuilt in the parent (``None`` where it does not unpickle).

        Examples:
            >>> RemoteError(KeyError("reward")).exception()
            KeyError('reward')
        """
        if self.pickled is None:
            return None
        try:
            return pickle.loads(self.pickled)
        except Exception:  # e.g. a class that only the child can import
            return None

    def as_exception(self, label: str, index: int, method: str, request: str) -> WorkerException:
        """The :class:`WorkerException` the parent raises for it: names the worker
        (``label``) and the ``request`` (``method`` is its public name), and carries the
        child's traceback; its cause is the original exception where that unpickles."""
        original = self.exception()
        err = WorkerException(
            f"{label} raised {self.type_name} in {request}: {self.message}\n\n"
            f"Traceback in the worker:\n{self.traceback.rstrip()}",
            index=index,
            method=method,
            remote_traceback=self.traceback,
            remote_exception=original,
        )
        err.__cause__ = original
        return err


def first_with_notes(errors: list[WorkerError]) -> WorkerError:
    """The first of several failures of one call, the others attached (``others``) and
    summed up in its notes.

    Examples:
        >>> err = first_with_notes([WorkerDiedError("worker 0 died", 0), WorkerDiedError("worker 1 died", 1)])
        >>> err.index, [other.index for other in err.others], err.__notes__
        (0, [1], ['also: WorkerDiedError: worker 1 died'])
    """
    first = errors[0]
    first.others = tuple(errors[1:])
    for other in errors[1:]:
        first.add_note(f"also: {type(other).__name__}: {str(other).splitlines()[0]}")
    return first
