"""The runner that lets the tick stop waiting (``_background``): it hands back what a call
returns or raises, and a call it gives up on keeps its own thread while the next call gets
another. With the batch's account (tests/publish/test_batch_account.py) it decides which claims
are given back when a batch is cut short."""

from __future__ import annotations

import threading
import time

import pytest

from celery_hashbeat._background import Abandoned, Runner


def test_the_runner_hands_back_results_and_errors() -> None:
    runner = Runner("test")
    assert runner.call(sum, [1, 2, 3], give_up=lambda: False) == 6
    with pytest.raises(ZeroDivisionError):
        runner.call(divmod, 1, 0, give_up=lambda: False)
    runner.close()


def test_an_abandoned_call_leaves_its_thread_and_the_next_call_gets_another() -> None:
    runner = Runner("test")
    hang = threading.Event()
    deadline = time.monotonic() + 0.2
    with pytest.raises(Abandoned):
        runner.call(hang.wait, 10, give_up=lambda: time.monotonic() > deadline)
    names = {thread.name for thread in threading.enumerate()}
    assert "test-1" in names  # still waiting, on its own
    assert runner.call(threading.current_thread, give_up=lambda: False).name == "test-2"
    hang.set()
    runner.close()
