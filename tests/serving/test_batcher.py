"""The dynamic batcher: the window counts from arrival, batches never exceed max_batch, the
queue is bounded and what it refuses is never computed."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gpulab.serving.batcher import DynamicBatcher, ModelError, QueueFullError, TooManyRowsError


class Recorder:
    """argmax over 4 inputs; records the rows of every call; optionally slow."""

    def __init__(self, seconds: float = 0.0):
        self.calls, self.seconds = [], seconds

    def __call__(self, X):
        self.calls.append(len(X))
        time.sleep(self.seconds)
        return np.argmax(X, axis=1)


def rows(n, hot=0):
    X = np.zeros((n, 4), dtype=np.float32)
    X[:, hot] = 1
    return X


def run(coroutine):
    """Run ``coroutine`` on a new event loop in its own thread, as the server runs the batcher:
    the calling thread may already have a running loop (a notebook's kernel has one; so may a
    test worker after an in-process kernel), where ``asyncio.run`` refuses to start."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, asyncio.wait_for(coroutine, 10)).result()


async def started(model, **kwargs):
    batcher = DynamicBatcher(model, executor=ThreadPoolExecutor(1), **kwargs)
    await batcher.start()
    return batcher


def test_a_batch_never_holds_more_than_max_batch_rows_and_no_request_is_split():
    model = Recorder()

    async def go():
        b = await started(model, max_batch=7, window_s=0.05, max_queue_rows=64)
        answers = [b.submit(rows(3, k % 4)) for k in range(10)]
        got = await asyncio.gather(*answers)
        await b.stop()
        return got, b.batch_sizes()

    got, sizes = run(go())
    assert all(n <= 7 for n in model.calls) and sum(model.calls) == 30
    assert set(model.calls) == {6}  # 3 + 3 fit, a third request would make 9
    assert sizes == {6: 5}
    for k, (classes, batch_rows) in enumerate(got):
        assert classes == [k % 4] * 3 and batch_rows == 6


def test_the_window_counts_from_each_requests_arrival():
    """While a slow batch computes, the next request's window runs: it is taken as soon as the
    model is free, not a whole window after."""
    model = Recorder(seconds=0.3)

    async def go():
        loop = asyncio.get_running_loop()
        b = await started(model, max_batch=64, window_s=0.1, max_queue_rows=64)
        first = b.submit(rows(1))
        while not model.calls:  # wait until the first batch (window over) is computing
            await asyncio.sleep(0.002)
        t_second = loop.time()
        second = b.submit(rows(1, 2))
        await first
        first_done = loop.time()
        await second
        done = loop.time()
        await b.stop()
        return t_second, first_done, done

    t_second, first_done, done = run(go())
    assert model.calls == [1, 1]
    # the second arrived while the first batch computed (0.3 s), its 0.1 s window over before
    # the model was free, so it ran at once: done one model call after the first, not 0.1 s more
    # (waiting for the first call, not a fixed sleep: under load the first batch starts late)
    assert first_done - t_second > 0.1
    assert done - first_done < 0.3 + 0.08


def test_max_batch_rows_waiting_start_a_batch_before_the_window_ends():
    model = Recorder()

    async def go():
        b = await started(model, max_batch=8, window_s=5.0, max_queue_rows=64)
        t0 = time.perf_counter()
        await asyncio.gather(*(b.submit(rows(2)) for _ in range(4)))
        await b.stop()
        return time.perf_counter() - t0

    assert run(go()) < 1.0 and model.calls == [8]


def test_the_queue_is_bounded_and_a_refused_request_is_never_computed():
    model = Recorder(seconds=0.1)

    async def go():
        b = await started(model, max_batch=4, window_s=0.0, max_queue_rows=8)
        with pytest.raises(TooManyRowsError, match="at most 4 rows"):
            b.submit(rows(5))
        first = b.submit(rows(4))
        await asyncio.sleep(0.02)  # the first batch is computing; 8 rows may wait
        waiting = [b.submit(rows(4)), b.submit(rows(4))]
        with pytest.raises(QueueFullError, match="8 of 8 rows"):
            b.submit(rows(1))
        await asyncio.gather(first, *waiting)
        await b.stop()

    run(go())
    assert model.calls == [4, 4, 4]  # the refused 5-row and 1-row requests never ran


def test_a_failing_model_fails_its_batch_and_the_batcher_goes_on():
    state = {"fail": True}

    def model(X):
        if state.pop("fail", False):
            raise RuntimeError("out of memory")
        return np.argmax(X, axis=1)

    async def go():
        b = await started(model, max_batch=8, window_s=0.0, max_queue_rows=8)
        with pytest.raises(ModelError, match="RuntimeError: out of memory"):
            await b.submit(rows(1))
        good = await b.submit(rows(1, 3))
        b.predict = lambda X: [0]  # one class for any number of rows
        with pytest.raises(ModelError, match="1 classes for 2 rows"):
            await b.submit(rows(2))
        await b.stop()
        return good

    assert run(go()) == ([3], 1)


def test_a_request_whose_caller_gave_up_is_not_computed():
    model = Recorder(seconds=0.1)

    async def go():
        b = await started(model, max_batch=1, window_s=0.0, max_queue_rows=4)
        first = b.submit(rows(1))
        await asyncio.sleep(0.02)
        abandoned = b.submit(rows(1))
        abandoned.cancel()
        await first
        await asyncio.sleep(0.05)
        await b.stop()

    run(go())
    assert model.calls == [1]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        DynamicBatcher(Recorder(), max_batch=8, window_s=0.0, max_queue_rows=4)
    with pytest.raises(ValueError):
        DynamicBatcher(Recorder(), max_batch=0, window_s=0.0, max_queue_rows=4)
    with pytest.raises(ValueError):
        DynamicBatcher(Recorder(), max_batch=8, window_s=-1, max_queue_rows=8)
