"""Work: the handle of an asynchronous op (the seed's Work over the runtime's Work)."""
from __future__ import annotations

import datetime as _dt
import time
from typing import Callable, List, Optional

from ..futures import Future

__all__ = ["Work"]


def _timeout_seconds(timeout) -> float:
    if isinstance(timeout, _dt.timedelta):
        return timeout.total_seconds()
    return float(timeout) / 1000.0  # milliseconds, as the seed's backend works take


class Work:
    """An issued op. wait() returns True once it has ended and raises its error.

    wait() with no timeout waits up to the group's timeout and raises DistTimeoutError
    (naming the op and the ranks at fault) when it runs out; wait(timeout) returns False
    when the op has not ended within `timeout` and leaves it running (wait again or abort).
    Outputs that travel through a staging buffer are in the caller's tensors once wait()
    (or get_future().wait()) has returned.
    """

    def __init__(self, works, done: Optional[Callable[[], None]] = None, tensors=None,
                 profiling_name: Optional[str] = None) -> None:
        self._works = [w for w in works if w is not None]
        self._done = done
        self._done_called = False
        self._tensors = list(tensors) if tensors is not None else []
        self._profiling_name = profiling_name

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)

    def is_success(self) -> bool:
        return self.is_completed() and all(w.is_success() for w in self._works)

    def exception(self) -> Optional[BaseException]:
        for w in self._works:
            try:
                w.rethrow()
            except Exception as error:  # noqa: BLE001 - returned, as the seed's API says
                return error
        return None

    def wait(self, timeout=None) -> bool:
        if timeout is None:
            for w in self._works:
                w.wait(-1)
        else:
            deadline = time.monotonic() + max(0.0, _timeout_seconds(timeout))
            for w in self._works:
                left_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if not w.wait(left_ms):
                    return False
        self._run_done()
        return True

    def _run_done(self) -> None:
        if self._done is not None and not self._done_called:
            self._done_called = True
            self._done()

    def get_future(self) -> Future:
        """A Future whose value is the op's output tensors."""
        fut = Future()

        def _completer() -> None:
            try:
                self.wait()
                fut.set_result(self._result_tensors())
            except Exception as error:  # noqa: BLE001 - carried to the future's waiter
                fut.set_exception(error)

        fut._completer = _completer
        fut._is_ready = self.is_completed
        return fut

    def result(self) -> List:
        return self._result_tensors()

    def _result_tensors(self) -> List:
        return list(self._tensors)

    def _source_rank(self) -> int:
        """The sender's global rank of a receive from any source (-1 before wait())."""
        return self._works[0].source_rank() if len(self._works) == 1 else -1

    def source_rank(self) -> int:
        return self._source_rank()

    def abort(self) -> None:
        """Ends the op as an error now and aborts its group's communicators."""
        for w in self._works:
            w.abort()

    def __repr__(self) -> str:
        state = "completed" if self.is_completed() else "pending"
        name = f" {self._profiling_name!r}" if self._profiling_name else ""
        return f"<Work{name} {state}>"
