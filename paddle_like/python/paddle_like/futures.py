"""paddle_like.futures: the Future that Work.get_future() returns.

A Future here completes lazily, as the seed's does: it holds a completer (the Work's wait)
that runs the first time someone asks for the result (wait(), value(), done() once the op
has ended, or a then() chained on it). No thread is started per future.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

__all__ = ["Future"]

_UNSET = object()


class Future:
    """The result of an asynchronous op: the op's output tensors, or its error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._result: Any = _UNSET
        self._exception: Optional[BaseException] = None
        self._completer: Optional[Callable[[], None]] = None
        self._is_ready: Callable[[], bool] = lambda: False
        self._callbacks: List[Callable[["Future"], None]] = []

    # -- completing
    def set_result(self, result: Any) -> None:
        self._finish(result, None)

    def set_exception(self, exception: BaseException) -> None:
        if not isinstance(exception, BaseException):
            raise TypeError("set_exception expects an exception instance")
        self._finish(_UNSET, exception)

    def _finish(self, result, exception) -> None:
        with self._lock:
            if self._result is not _UNSET or self._exception is not None:
                raise RuntimeError("Future is already completed")
            self._result, self._exception = result, exception
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def _complete(self) -> None:
        completer, self._completer = self._completer, None
        if completer is not None and not self._completed():
            completer()

    def _completed(self) -> bool:
        return self._result is not _UNSET or self._exception is not None

    # -- reading
    def done(self) -> bool:
        """True once the op has ended (its result or error is then available)."""
        if not self._completed() and self._completer is not None and self._is_ready():
            self._complete()
        return self._completed()

    def wait(self) -> Any:
        """Blocks until the op ends; returns its result or raises its error."""
        self._complete()
        if not self._completed():
            raise RuntimeError("Future has no result and nothing that will produce one")
        if self._exception is not None:
            raise self._exception
        return self._result

    def value(self) -> Any:
        return self.wait()

    def then(self, callback: Callable[["Future"], Any]) -> "Future":
        """A Future of callback(self), run when this one completes."""
        child = Future()

        def run() -> None:
            try:
                self._complete()
                child.set_result(callback(self))
            except Exception as error:  # noqa: BLE001 - carried to the child's waiter
                if not child._completed():
                    child.set_exception(error)

        child._completer = run
        child._is_ready = self.done
        return child

    def add_done_callback(self, callback: Callable[["Future"], None]) -> None:
        """Runs callback(self) when this future completes (at once if it has)."""
        with self._lock:
            if not self._completed():
                self._callbacks.append(callback)
                return
        callback(self)
