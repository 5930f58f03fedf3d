"""A Ctrl-C the interpreter drops (raised inside a weakref callback) is raised again."""

from __future__ import annotations

import signal
import weakref

import pytest

from gnntrain.runtime import interrupts

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class _Held:
    pass


def _swallowed_sigint() -> None:
    """SIGINT delivered inside a weakref callback: Python prints "Exception ignored" and
    goes on, as it did to a run that then finished all its epochs."""
    held = _Held()
    ref = weakref.ref(held, lambda _: signal.raise_signal(signal.SIGINT))
    del held
    assert ref() is None


def test_a_swallowed_ctrl_c_is_raised_at_the_next_wait() -> None:
    with interrupts.recorded():
        _swallowed_sigint()  # no exception here: the interpreter dropped it
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_pending()
        interrupts.raise_pending()  # raised once, not again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_the_record_a_swallowed_ctrl_c_is_lost() -> None:
    """The failure :func:`interrupts.recorded` exists for (this test fails if Python ever
    stops dropping exceptions from weakref callbacks, and the module can go)."""
    _swallowed_sigint()
    interrupts.raise_pending()


def test_ctrl_c_still_raises_where_it_lands() -> None:
    with interrupts.recorded(), pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_users_handler_is_left_alone() -> None:
    seen: list[int] = []

    def mine(signum: int, frame: object) -> None:
        seen.append(signum)

    before = signal.signal(signal.SIGINT, mine)
    try:
        with interrupts.recorded():
            assert signal.getsignal(signal.SIGINT) is mine
            signal.raise_signal(signal.SIGINT)
            interrupts.raise_pending()
        assert seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, before)
