"""Dynamic batching, the course's own code (the lesson of chapter 12; the HTTP around it is
aiohttp's, in :mod:`~gpulab.serving.server`).

Requests wait in a **bounded** first-in-first-out queue. One asyncio task runs the batches:

- a batch runs when the **oldest** waiting request has waited ``window_s`` since it
  **arrived**, or as soon as ``max_batch`` rows are waiting, whichever comes first;
- a batch takes waiting requests in arrival order while their rows fit in ``max_batch``: a batch
  never holds more than ``max_batch`` rows, and a request is never split (one with more rows
  than ``max_batch`` is refused when it is submitted: :class:`TooManyRowsError`);
- at most ``max_queue_rows`` rows wait; a request that would overflow the queue is refused at
  once (:class:`QueueFullError`, which the server answers 503) and is never computed;
- the model runs in an executor thread (``run_in_executor``), so the event loop keeps reading
  and answering requests while a batch computes; requests that arrive meanwhile wait for the
  next batch.

While a batch computes, the window of the requests behind it keeps running: under load the next
batch starts as soon as the model is free, because its oldest request has already waited. That
is why batches grow under load even with ``window_s = 0``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter, deque
from dataclasses import dataclass

import numpy as np


class QueueFullError(Exception):
    """The queue holds ``max_queue_rows`` rows already: come back later."""


class TooManyRowsError(ValueError):
    """A request with more rows than one batch may hold."""


class ModelError(RuntimeError):
    """The model raised, or answered the wrong number of classes, for a batch."""


@dataclass
class Waiting:
    """One request's rows in the queue, when it arrived and where its answer goes."""

    rows: np.ndarray
    arrived_s: float
    answer: asyncio.Future


class DynamicBatcher:
    """Batch ``predict(X) -> classes`` calls; use :meth:`submit` from the batcher's event loop,
    after :meth:`start`."""

    def __init__(self, predict, max_batch: int, window_s: float, max_queue_rows: int,
                 executor=None):
        if max_batch < 1 or window_s < 0 or max_queue_rows < max_batch:
            raise ValueError("need max_batch >= 1, window_s >= 0 and max_queue_rows >= "
                             "max_batch")
        self.predict = predict
        self.max_batch = int(max_batch)
        self.window_s = float(window_s)
        self.max_queue_rows = int(max_queue_rows)
        self.executor = executor
        self.queue: deque[Waiting] = deque()
        self.waiting_rows = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._lock = threading.Lock()  # the counters are read from other threads
        self._batch_sizes: Counter = Counter()
        self._model_s = 0.0

    # --- the two ends: submit a request, run the loop ---------------------------------------
    def submit(self, rows: np.ndarray) -> asyncio.Future:
        """Queue ``rows``; the future resolves to (classes, rows in the batch). Raises
        :class:`TooManyRowsError` or :class:`QueueFullError` at once; then nothing is queued."""
        n = len(rows)
        if n > self.max_batch:
            raise TooManyRowsError(f"a request may carry at most {self.max_batch} rows (one "
                                   f"batch); this one has {n}: send it in parts")
        if self.waiting_rows + n > self.max_queue_rows:
            raise QueueFullError(f"the queue is full ({self.waiting_rows} of "
                                 f"{self.max_queue_rows} rows waiting)")
        loop = asyncio.get_running_loop()
        item = Waiting(rows, loop.time(), loop.create_future())
        self.queue.append(item)
        self.waiting_rows += n
        self._wake.set()
        return item.answer

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self.run_batches())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for item in self.queue:
            if not item.answer.done():
                item.answer.cancel()
        self.queue.clear()
        self.waiting_rows = 0

    async def run_batches(self) -> None:
        """The batching loop (started by :meth:`start`): wait for a request; wait until the
        oldest has waited ``window_s`` or ``max_batch`` rows wait; take a batch; compute it."""
        loop = asyncio.get_running_loop()
        while True:
            if not self.queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            deadline = self.queue[0].arrived_s + self.window_s  # from the oldest's arrival
            while self.waiting_rows < self.max_batch and self.queue:
                left = deadline - loop.time()
                if left <= 0:
                    break
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch = self.take_batch()
            if batch:
                await self._compute(batch, loop)

    def take_batch(self) -> list[Waiting]:
        """The oldest waiting requests whose rows fit in one batch; requests whose caller gave
        up (a cancelled future) are dropped, not computed."""
        batch, rows = [], 0
        while self.queue:
            head = self.queue[0]
            if head.answer.done():
                self.queue.popleft()
                self.waiting_rows -= len(head.rows)
                continue
            if rows + len(head.rows) > self.max_batch:
                break
            self.queue.popleft()
            self.waiting_rows -= len(head.rows)
            batch.append(head)
            rows += len(head.rows)
        return batch

    async def _compute(self, batch: list[Waiting], loop) -> None:
        X = np.concatenate([item.rows for item in batch])
        t0 = loop.time()
        try:
            classes = await loop.run_in_executor(self.executor, self._predict_classes, X)
            error = None
        except Exception as exc:  # the model failed: every request of the batch hears so
            classes, error = [], ModelError(f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._batch_sizes[len(X)] += 1
            self._model_s += loop.time() - t0
        start = 0
        for item in batch:
            n = len(item.rows)
            if item.answer.done():  # its caller gave up while the batch ran
                pass
            elif error is not None:
                item.answer.set_exception(error)
            else:
                item.answer.set_result((classes[start:start + n], len(X)))
            start += n

    def _predict_classes(self, X: np.ndarray) -> list[int]:
        classes = np.asarray(self.predict(X)).astype(int).ravel().tolist()
        if len(classes) != len(X):
            raise ValueError(f"the model answered {len(classes)} classes for {len(X)} rows")
        return classes

    # --- what it did ----------------------------------------------------------------------
    def batch_sizes(self) -> dict[int, int]:
        """How many batches of each size (rows) ran."""
        with self._lock:
            return dict(sorted(self._batch_sizes.items()))

    def model_seconds(self) -> float:
        """Seconds the batches took, from handing each to the executor to its classes."""
        with self._lock:
            return self._model_s


__all__ = ["DynamicBatcher", "ModelError", "QueueFullError", "TooManyRowsError", "Waiting"]
