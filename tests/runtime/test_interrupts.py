"""A Ctrl-C the interpreter drops (raised inside a weakref callback) is raised again."""

from __future__ import annotations

import signal
import time
import weakref
from typing import Any

import pytest

from gnntrain.runtime import interrupts
from gnntrain.runtime.ray_group import RayGroup

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(autouse=True)
def _default_sigint() -> Any:
    """Python's own Ctrl-C handler, as an interactive run has it: a process started in the
    background (``cmd &``) inherits SIGINT ignored, and then there is nothing to record."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


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



class _WaitOnly(RayGroup):
    """A group with no workers and no placement group: only the coordinator's wait."""

    def __init__(self) -> None:
        self.stall_s = 120.0

    def diagnose(self, timeout_s: float = 5.0, ranks: list[int] | None = None) -> list[dict[str, Any]]:
        return []  # no progress to read


def test_the_coordinators_wait_raises_a_swallowed_ctrl_c_at_once(ray_local: None) -> None:
    """A worker call that would run for a minute: a dropped Ctrl-C ends the wait within
    its first poll, not when the call returns."""
    import ray

    @ray.remote(num_cpus=0)
    def long_call() -> int:
        time.sleep(60)
        return 1

    ref = long_call.remote()
    try:
        with interrupts.recorded(), pytest.raises(KeyboardInterrupt):
            _swallowed_sigint()
            _WaitOnly()._get([ref], phase="epoch 0")
        ready, _ = ray.wait([ref], timeout=0)
        assert not ready, "the wait returned with the call, not at the Ctrl-C"
    finally:
        ray.cancel(ref, force=True)
