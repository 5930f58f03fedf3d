"""Ctrl-C that is never lost while workers run.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be. When that is
a weakref callback or a ``__del__`` (Ray and torch run many), the interpreter prints
"Exception ignored" and drops it, and the run would carry on to its last epoch. Inside
:func:`recorded`, SIGINT is also written down, and the coordinator's waits call
:func:`raise_pending`, so a swallowed Ctrl-C is raised again within one poll.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_pending = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _pending
    _pending = True
    raise KeyboardInterrupt


@contextmanager
def recorded() -> Iterator[None]:
    """Record SIGINT while inside (then raise it as usual). Only on the main thread, and
    only over Python's default handler: a handler the user installed, or SIGINT ignored,
    is left as it is."""
    global _pending
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    _pending = False
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _pending = False


def raise_pending() -> None:
    """Raise ``KeyboardInterrupt`` if a SIGINT was recorded and not yet raised here."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt
