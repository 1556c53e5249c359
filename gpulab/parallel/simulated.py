"""Ranks as threads in this process, speaking mpi4py's point-to-point API: how chapter 11's
ring all-reduce exercise is checked, and how the chapter still runs where no MPI is installed.

:func:`run_ranks` starts ``size`` threads; each calls ``function(comm, *args)`` with its own
:class:`Comm`, which has the mpi4py methods the course uses:

- point to point, on NumPy buffers: ``Send(buf, dest, tag=0)``, ``Recv(buf, source, tag)``,
  ``Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG)``,
  ``Sendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG)``,
  ``Isend`` / ``Irecv`` (returning a :class:`Request` with ``Wait()`` and ``Test()``;
  ``Request.Waitall``/``Waitany``/``Waitsome``/``Testall``, as mpi4py's ``MPI.Request``'s,
  and :class:`StandInMPI`, mpi4py's ``MPI`` with these requests); on Python objects:
  ``send``, ``recv``, ``sendrecv``;
- ``Get_rank()``, ``Get_size()``, ``rank``, ``size``;
- collectives (``Allreduce``, ``allreduce``, ``allgather``, ``bcast``, ``gather``, ``Barrier``)
  only when the world allows them: the ring exercise's world does not, so that a learner's
  all-reduce has to be built from messages.

What makes it a fair judge of message-passing code:

- **``Send`` is synchronous**: it returns only when the receiver has taken the message. MPI
  allows this (a correct MPI program must not rely on ``Send`` buffering its message; Open MPI
  buffers small messages and blocks on large ones), so code that is only correct for small
  messages fails here every time, not only on a large cluster.
- **Deadlocks are detected, not waited out**: when every rank that has not returned is blocked
  and no blocked rank can go on, every rank stops with :class:`DeadlockError`, whose message
  says what each rank was waiting for. A wall-clock limit catches the rest.
- **Messages are bytes**: a receive copies the message's bytes into the receiving buffer, and a
  message longer than the buffer is an error (:class:`TruncationError`), as MPI's
  ``MPI_ERR_TRUNCATE``; a non-contiguous buffer is refused, as mpi4py refuses it.
- **``Irecv`` posts its receive at once**, as MPI does: a message that arrives afterwards goes
  straight into its buffer (posted receives are matched in the order they were posted), so an
  ``Isend`` to a rank that posted an ``Irecv`` completes without that rank's ``Wait``.
- Every rank's bytes and messages sent are counted (:attr:`RankResults.bytes_sent`), and every
  message's sender and receiver recorded in order (:attr:`RankResults.routes`), so a check can
  tell a ring (each rank sends 2(N-1)/N of the vector, only to its neighbour) from a naive or
  a pairwise exchange.

Times measured here are not communication times: the threads share one interpreter (and its
lock), so the chapter labels them as such.
"""

from __future__ import annotations

import copy
import pickle
import threading
import time
import types
from dataclasses import dataclass, field

import numpy as np

ANY_SOURCE = -1
ANY_TAG = -1
UNDEFINED = -32766  # what Waitany returns when no request is active (mpi4py's MPI.UNDEFINED)
COLLECTIVES = ("Allreduce", "allreduce", "Allgather", "allgather", "Bcast", "bcast", "Gather",
               "gather", "Reduce", "reduce", "Reduce_scatter", "Barrier", "barrier", "Alltoall",
               "alltoall", "Scatter", "scatter")


class CommError(RuntimeError):
    """Something a rank did with its communicator that MPI would refuse or never finish."""


class DeadlockError(CommError):
    """Every rank still running waits for something no rank will ever do."""


class TruncationError(CommError):
    """A message was longer than the buffer receiving it (MPI_ERR_TRUNCATE)."""


class CollectiveNotAllowedError(CommError):
    """A collective was called in a world that allows only point-to-point messages."""


class WorldAbortedError(CommError):
    """Another rank failed, so this one stopped at its next message."""


class RequestsNotCompletedError(CommError):
    """A rank returned while requests it started (Isend, Irecv) were never completed."""


class RanksDidNotFinishError(CommError):
    """A rank was still running when the time limit ran out."""


@dataclass
class _Message:
    source: int
    dest: int
    tag: int
    payload: object  # bytes for buffers, a private copy for objects
    nbytes: int
    is_buffer: bool
    taken: bool = False


def _contiguous(buffer, rank: int, what: str) -> np.ndarray:
    """The NumPy array behind an mpi4py buffer argument (``x`` or ``[x, MPI.DOUBLE]``)."""
    if isinstance(buffer, (list, tuple)) and buffer:
        buffer = buffer[0]
    if not isinstance(buffer, np.ndarray):
        raise CommError(f"rank {rank}: {what} must be a NumPy array (mpi4py's upper-case "
                        f"methods send buffers), not {type(buffer).__name__}; for Python "
                        "objects use the lower-case send/recv/sendrecv")
    if not buffer.flags.c_contiguous:
        raise CommError(f"rank {rank}: {what} is not contiguous in memory (a strided view such "
                        "as x[::2]); MPI needs one block of memory: pass a slice x[a:b] or "
                        "np.ascontiguousarray(...)")
    return buffer


class Request:
    """What ``Isend``/``Irecv`` return: ``Wait()`` finishes the operation (``wait()`` also
    returns a received object), ``Test()`` says without waiting whether it could finish now
    (and finishes it then). ``Request.Waitall(requests)`` waits for each, as mpi4py's
    ``MPI.Request.Waitall``."""

    def __init__(self, finish, ready=None, on_done=None, what: str = "a request"):
        self._finish = finish
        self._ready = ready
        self._on_done = on_done
        self.what = what
        self._done = False
        self._value = None

    def Wait(self, status=None):
        if not self._done:
            try:
                self._value = self._finish()
            finally:
                self._done = True
                if self._on_done is not None:
                    self._on_done(self)
        return True

    def wait(self, status=None):
        self.Wait()
        return self._value

    def Test(self, status=None) -> bool:
        if not self._done and self._ready is not None and not self._ready():
            return False
        self.Wait()
        return True

    test = Test

    # mpi4py's class methods on lists of requests. A completed request is inactive for MPI
    # (mpi4py sets it to REQUEST_NULL in place), and None entries are skipped as MPI skips
    # REQUEST_NULL.
    @staticmethod
    def _active(requests) -> list[tuple[int, Request]]:
        return [(i, r) for i, r in enumerate(requests) if r is not None and not r._done]

    @staticmethod
    def Waitall(requests, statuses=None) -> bool:
        for request in requests:
            if request is not None:
                request.Wait()
        return True

    @staticmethod
    def waitall(requests, statuses=None) -> list:
        return [None if request is None else request.wait() for request in requests]

    @staticmethod
    def Testall(requests, statuses=None) -> bool:
        return all([request.Test() for request in requests if request is not None])

    testall = Testall

    @staticmethod
    def Waitany(requests, status=None) -> int:
        """The index of a request that finished (one ready now, else the first pending one,
        waited for); :data:`UNDEFINED` when none is active."""
        pending = Request._active(requests)
        if not pending:
            return UNDEFINED
        done = next((i for i, request in pending if request.Test()), None)
        if done is None:
            done, request = pending[0]
            request.Wait()
        return done

    @staticmethod
    def waitany(requests, status=None) -> tuple:
        index = Request.Waitany(requests)
        return index, (None if index == UNDEFINED else requests[index].wait())

    @staticmethod
    def Waitsome(requests, statuses=None) -> list | None:
        pending = Request._active(requests)
        if not pending:
            return None
        done = [i for i, request in pending if request.Test()]
        if not done:
            pending[0][1].Wait()
            done = [pending[0][0]]
        return done


class StandInMPI(types.ModuleType):
    """mpi4py's ``MPI`` module as code running on these ranks sees it: the real module (its
    datatypes, constants, ...), but with :class:`Request` and this module's ``ANY_SOURCE`` and
    ``ANY_TAG``, so that ``MPI.Request.Waitall(requests)``, as mpi4py's documentation writes
    it, works on the simulated requests (mpi4py's own refuse them, and its class is immutable).
    """

    def __init__(self, real: types.ModuleType):
        super().__init__(real.__name__, real.__doc__)
        self._real = real
        self.Request = Request
        self.ANY_SOURCE = ANY_SOURCE
        self.ANY_TAG = ANY_TAG

    def __getattr__(self, name: str):
        return getattr(self._real, name)


@dataclass
class _PostedRecv:
    """A receive posted by ``Irecv``: the buffer a matching message is delivered into, when the
    request completes (Wait, Test): until then MPI leaves the buffer undefined."""

    rank: int
    source: int
    tag: int
    buffer: np.ndarray
    done: bool = False
    message: _Message | None = None  # matched, delivered into ``buffer`` on completion


def _deliver(message: _Message, target: np.ndarray, rank: int) -> None:
    """Copy a buffer message's bytes into ``target`` (rank ``rank``'s receive buffer)."""
    if not message.is_buffer:
        raise CommError(f"rank {rank} received an object sent with send() into a "
                        "buffer: pair Send with Recv and send with recv")
    if message.nbytes > target.nbytes:
        raise TruncationError(
            f"rank {rank} received {message.nbytes} bytes from rank "
            f"{message.source} into a buffer of {target.nbytes} bytes "
            f"({target.size} elements of {target.dtype})")
    if message.nbytes:
        target.reshape(-1).view(np.uint8)[:message.nbytes] = np.frombuffer(
            message.payload, dtype=np.uint8)


class World:
    """The shared state of ``size`` ranks: pending messages, who waits for what, counters."""

    def __init__(self, size: int, allow_collectives: bool = True, timeout_s: float = 10.0):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"size must be a whole number >= 1, not {size!r}")
        self.size = int(size)
        self.allow_collectives = allow_collectives
        self.timeout_s = float(timeout_s)
        self.cond = threading.Condition()
        self.pending: list[_Message] = []
        self.posted: list[_PostedRecv] = []
        self.routes: list[tuple[int, int]] = []
        self.open_requests: list[list[Request]] = [[] for _ in range(self.size)]
        self.blocked: dict[int, tuple[str, object]] = {}
        self.done: set[int] = set()
        self.failure: BaseException | None = None
        self.bytes_sent = [0] * self.size
        self.messages_sent = [0] * self.size
        self._arrived = 0
        self._generation = 0
        self._slots: list = [None] * self.size
        self._results: dict[int, list] = {}
        self.comms = [Comm(self, rank) for rank in range(self.size)]

    # -- waiting, with deadlock detection ---------------------------------------------------

    def fail(self, error: BaseException) -> None:
        with self.cond:
            if self.failure is None:
                self.failure = error
            self.cond.notify_all()

    def _check_failure(self, rank: int) -> None:
        if self.failure is not None:
            if isinstance(self.failure, (DeadlockError, RanksDidNotFinishError)):
                raise type(self.failure)(str(self.failure))
            raise WorldAbortedError(f"rank {rank} stopped: another rank failed "
                                    f"({type(self.failure).__name__}: {self.failure})")

    def _deadlocked(self) -> bool:
        alive = [r for r in range(self.size) if r not in self.done]
        if not alive or any(r not in self.blocked for r in alive):
            return False
        return not any(predicate() for _, predicate in self.blocked.values())

    def _deadlock_text(self) -> str:
        waits = "; ".join(f"rank {r} waits in {self.blocked[r][0]}" for r in sorted(self.blocked))
        returned = sorted(self.done)
        if returned:
            waits += f"; rank{'s' if len(returned) > 1 else ''} " \
                     f"{', '.join(map(str, returned))} already returned"
        return f"deadlock: {waits}. No rank can go on."

    def wait(self, rank: int, description: str, predicate) -> None:
        """Block ``rank`` (the caller holds ``cond``) until ``predicate()`` holds."""
        deadline = time.monotonic() + self.timeout_s
        try:
            while not predicate():
                self._check_failure(rank)
                self.blocked[rank] = (description, predicate)
                if self._deadlocked():
                    self.failure = self.failure or DeadlockError(self._deadlock_text())
                    self.cond.notify_all()
                    self._check_failure(rank)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.failure = self.failure or RanksDidNotFinishError(
                        f"rank {rank} waited {self.timeout_s:g} s in {description}")
                    self.cond.notify_all()
                    self._check_failure(rank)
                self.cond.wait(timeout=min(remaining, 0.05))
                self.blocked.pop(rank, None)
        finally:
            self.blocked.pop(rank, None)

    def finished(self, rank: int) -> None:
        with self.cond:
            self.done.add(rank)
            self.cond.notify_all()

    # -- messages -----------------------------------------------------------------------------

    def post(self, message: _Message) -> None:
        """Called with ``cond`` held."""
        self._check_failure(message.source)
        if not 0 <= message.dest < self.size:
            raise CommError(f"rank {message.source} sent to rank {message.dest}, but the ranks "
                            f"are 0..{self.size - 1}: take neighbours modulo the size, "
                            "(rank + 1) % size")
        self.bytes_sent[message.source] += message.nbytes
        self.messages_sent[message.source] += 1
        self.routes.append((message.source, message.dest))
        for posted in self.posted:
            if (posted.rank == message.dest and posted.source in (ANY_SOURCE, message.source)
                    and posted.tag in (ANY_TAG, message.tag)):
                self.posted.remove(posted)
                self._fill(posted, message)
                break
        else:
            self.pending.append(message)
        self.cond.notify_all()

    @staticmethod
    def _fill(posted: _PostedRecv, message: _Message) -> None:
        """Match ``message`` to a posted receive; its request's completion delivers it."""
        message.taken = True
        posted.message = message
        posted.done = True

    def post_receive(self, posted: _PostedRecv) -> None:
        """``Irecv``: take a matching pending message now, or wait for one (``cond`` held)."""
        self._check_failure(posted.rank)
        if posted.source != ANY_SOURCE and not 0 <= posted.source < self.size:
            raise CommError(f"rank {posted.rank} receives from rank {posted.source}, but the "
                            f"ranks are 0..{self.size - 1}: take neighbours modulo the size")
        message = self.match(posted.rank, posted.source, posted.tag)
        if message is not None:
            self.pending.remove(message)
            self._fill(posted, message)
            self.cond.notify_all()
        else:
            self.posted.append(posted)

    def match(self, rank: int, source: int, tag: int) -> _Message | None:
        for message in self.pending:
            if (message.dest == rank and not message.taken
                    and source in (ANY_SOURCE, message.source) and tag in (ANY_TAG, message.tag)):
                return message
        return None

    def take(self, rank: int, source: int, tag: int, what: str) -> _Message:
        """Wait for a matching message to ``rank`` and take it (``cond`` held)."""
        if source != ANY_SOURCE and not 0 <= source < self.size:
            raise CommError(f"rank {rank} receives from rank {source}, but the ranks are "
                            f"0..{self.size - 1}: take neighbours modulo the size, "
                            "(rank - 1) % size")
        who = "any rank" if source == ANY_SOURCE else f"rank {source}"
        self.wait(rank, f"{what} from {who}", lambda: self.match(rank, source, tag) is not None)
        message = self.match(rank, source, tag)
        message.taken = True
        self.pending.remove(message)
        self.cond.notify_all()
        return message

    # -- collectives --------------------------------------------------------------------------

    def exchange(self, rank: int, value, what: str) -> list:
        """Every rank deposits a value; all get the list of them, in rank order."""
        with self.cond:
            self._check_failure(rank)
            generation = self._generation
            self._slots[rank] = value
            self._arrived += 1
            if self._arrived == self.size:
                self._results[generation] = list(self._slots)
                self._results.pop(generation - 2, None)
                self._slots = [None] * self.size
                self._arrived = 0
                self._generation += 1
                self.cond.notify_all()
            else:
                self.wait(rank, f"{what} (waiting for every rank to call it)",
                          lambda: self._generation != generation)
            return self._results[generation]


def _op_sum(values):
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


def _reduce(values, op):
    name = getattr(op, "name", None) or getattr(op, "__name__", None) or str(op or "SUM")
    name = name.upper().replace("MPI_", "")
    if "MAX" in name:
        return np.maximum.reduce(values) if isinstance(values[0], np.ndarray) else max(values)
    if "MIN" in name:
        return np.minimum.reduce(values) if isinstance(values[0], np.ndarray) else min(values)
    return _op_sum(values)


class Comm:
    """One rank's view of a :class:`World`, with mpi4py's method names."""

    def __init__(self, world: World, rank: int):
        self.world = world
        self._rank = rank

    # identity
    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self.world.size

    def Get_rank(self) -> int:
        return self._rank

    def Get_size(self) -> int:
        return self.world.size

    @staticmethod
    def Wtime() -> float:
        return time.perf_counter()

    # point to point, buffers
    def _buffer_message(self, buffer, dest: int, tag: int) -> _Message:
        array = _contiguous(buffer, self._rank, "the send buffer")
        return _Message(self._rank, int(dest), int(tag), array.tobytes(), array.nbytes, True)

    def _deliver(self, message: _Message, buffer) -> None:
        _deliver(message, _contiguous(buffer, self._rank, "the receive buffer"), self._rank)

    def _post_and_wait(self, message: _Message, call: str) -> None:
        """Post ``message`` and block until its receiver takes it (``call`` names the wait in
        a deadlock report: Send, send)."""
        world = self.world
        with world.cond:
            world.post(message)
            world.wait(self._rank, f"{call} to rank {message.dest} (until rank {message.dest} "
                       "receives it)", lambda: message.taken)

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self._post_and_wait(self._buffer_message(buf, dest, tag), "Send")

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None) -> None:
        world = self.world
        with world.cond:
            world._check_failure(self._rank)
            message = world.take(self._rank, int(source), int(tag), "Recv")
            self._deliver(message, buf)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG, status=None) -> None:
        if recvbuf is None:
            raise CommError(f"rank {self._rank}: Sendrecv needs recvbuf=..., the array the "
                            "incoming message is written to")
        world = self.world
        with world.cond:
            message = self._buffer_message(sendbuf, dest, sendtag)
            world.post(message)
            incoming = world.take(self._rank, int(source), int(recvtag), "Sendrecv")
            self._deliver(incoming, recvbuf)
            world.wait(self._rank, f"Sendrecv to rank {dest} (until rank {dest} receives it)",
                       lambda: message.taken)

    def Sendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                         recvtag: int = ANY_TAG, status=None) -> None:
        """Send ``buf`` to ``dest`` and receive into the same ``buf`` from ``source``, as
        mpi4py's: the message sent is ``buf`` as it was before the call."""
        world = self.world
        with world.cond:
            message = self._buffer_message(buf, dest, sendtag)  # copied: buf is written next
            world.post(message)
            incoming = world.take(self._rank, int(source), int(recvtag), "Sendrecv_replace")
            self._deliver(incoming, buf)
            world.wait(self._rank, f"Sendrecv_replace to rank {dest} (until rank {dest} "
                       "receives it)", lambda: message.taken)

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._post_request(self._buffer_message(buf, dest, tag), "Isend", "Wait",
                                  _contiguous(buf, self._rank, "the send buffer"))

    def _post_request(self, message: _Message, call: str, wait: str,
                      buffer: np.ndarray | None = None) -> Request:
        """Post ``message`` now; its request (``call``: Isend, isend) finishes when the
        receiver has taken it (``wait`` names the wait in a deadlock report). The message is
        copied when posted; with ``buffer`` (Isend's), the request's completion checks the
        buffer still holds it: MPI may read a send buffer until then, so a rank that writes
        into it before is told so (on a real MPI what arrives would be undefined)."""
        world, dest = self.world, message.dest
        with world.cond:
            world.post(message)

        def finish():
            with world.cond:
                world.wait(self._rank, f"{wait} for an {call} to rank {dest} (until rank {dest} "
                           "receives it)", lambda: message.taken)
            if buffer is not None and buffer.tobytes() != message.payload:
                raise CommError(
                    f"rank {self._rank}: the send buffer of an {call} to rank {dest} changed "
                    f"before its {wait}(): MPI may read a send buffer until its request "
                    "completes, so what arrives is undefined; wait for the request before "
                    "writing into the buffer again (or send from another one)")

        return self._request(finish, lambda: message.taken, f"an {call} to rank {dest}")

    def _request(self, finish, ready, what: str) -> Request:
        """A request this rank must complete (Wait, Test) before it returns."""
        opened = self.world.open_requests[self._rank]
        request = Request(finish, ready, on_done=opened.remove, what=what)
        opened.append(request)
        return request

    def Irecv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        world = self.world
        posted = _PostedRecv(self._rank, int(source), int(tag),
                             _contiguous(buf, self._rank, "the receive buffer"))
        if np.issubdtype(posted.buffer.dtype, np.floating):  # undefined until the Wait
            posted.buffer[...] = np.nan
        with world.cond:
            world.post_receive(posted)
        who = "any rank" if posted.source == ANY_SOURCE else f"rank {posted.source}"

        def finish():
            with world.cond:
                world.wait(self._rank, f"Wait for an Irecv from {who}", lambda: posted.done)
            _deliver(posted.message, posted.buffer, posted.rank)

        return self._request(finish, lambda: posted.done, f"an Irecv from {who}")

    # point to point, Python objects
    def _object_message(self, obj, dest: int, tag: int) -> _Message:
        nbytes = obj.nbytes if isinstance(obj, np.ndarray) else len(pickle.dumps(obj))
        return _Message(self._rank, int(dest), int(tag), copy.deepcopy(obj), nbytes, False)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self._post_and_wait(self._object_message(obj, dest, tag), "send")

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None):
        world = self.world
        with world.cond:
            world._check_failure(self._rank)
            message = world.take(self._rank, int(source), int(tag), "recv")
        if message.is_buffer:
            raise CommError(f"rank {self._rank} called recv() for a message sent with Send(): "
                            "pair Send with Recv and send with recv")
        return message.payload

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._post_request(self._object_message(obj, dest, tag), "isend", "wait")

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """The object a matching ``send``/``isend`` sent, taken when the request is waited for
        (``request.wait()`` returns it)."""
        world = self.world
        source, tag = int(source), int(tag)

        def finish():
            with world.cond:
                world._check_failure(self._rank)
                message = world.take(self._rank, source, tag, "irecv")
            if message.is_buffer:
                raise CommError(f"rank {self._rank} called irecv() for a message sent with "
                                "Send() or Isend(): pair Isend with Irecv and isend with irecv")
            return message.payload

        who = "any rank" if source == ANY_SOURCE else f"rank {source}"
        return self._request(finish, lambda: world.match(self._rank, source, tag) is not None,
                             f"an irecv from {who}")

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG, status=None):
        world = self.world
        with world.cond:
            message = self._object_message(sendobj, dest, sendtag)
            world.post(message)
            incoming = world.take(self._rank, int(source), int(recvtag), "sendrecv")
            world.wait(self._rank, f"sendrecv to rank {dest} (until rank {dest} receives it)",
                       lambda: message.taken)
        if incoming.is_buffer:
            raise CommError(f"rank {self._rank} called sendrecv() for a message sent with "
                            "Send(): use the same family on both sides")
        return incoming.payload

    # collectives (when the world allows them)
    def _collective(self, name: str) -> None:
        if not self.world.allow_collectives:
            raise CollectiveNotAllowedError(
                f"comm.{name} is not available here: this exercise builds the all-reduce from "
                "point-to-point messages (Send, Recv, Sendrecv, Isend, Irecv)")

    def Barrier(self) -> None:
        self._collective("Barrier")
        self.world.exchange(self._rank, None, "Barrier")

    barrier = Barrier

    def Allreduce(self, sendbuf, recvbuf, op=None) -> None:
        self._collective("Allreduce")
        send = _contiguous(sendbuf, self._rank, "the send buffer")
        recv = _contiguous(recvbuf, self._rank, "the receive buffer")
        values = self.world.exchange(self._rank, send.copy(), "Allreduce")
        recv[...] = _reduce(values, op)

    def allreduce(self, sendobj, op=None):
        self._collective("allreduce")
        return _reduce(self.world.exchange(self._rank, copy.deepcopy(sendobj), "allreduce"), op)

    def allgather(self, sendobj) -> list:
        self._collective("allgather")
        return self.world.exchange(self._rank, copy.deepcopy(sendobj), "allgather")

    def bcast(self, obj=None, root: int = 0):
        self._collective("bcast")
        return copy.deepcopy(self.world.exchange(self._rank, obj, "bcast")[root])

    def gather(self, sendobj, root: int = 0):
        self._collective("gather")
        values = self.world.exchange(self._rank, copy.deepcopy(sendobj), "gather")
        return values if self._rank == root else None

    def __getattr__(self, name: str):
        if name in COLLECTIVES:
            self._collective(name)
        raise AttributeError(f"this communicator (ranks as threads, gpulab.parallel.simulated) "
                             f"has no {name!r}; it has Send, Recv, Sendrecv, Sendrecv_replace, "
                             "Isend, Irecv, send, recv, sendrecv, isend, irecv, Get_rank, "
                             "Get_size")

    def __repr__(self) -> str:
        return f"<simulated communicator: rank {self._rank} of {self.world.size} (threads)>"


@dataclass
class RankResults:
    """What :func:`run_ranks` saw: each rank's return value or exception, and the traffic."""

    size: int
    returns: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # None, or the exception each rank raised
    bytes_sent: list[int] = field(default_factory=list)
    messages_sent: list[int] = field(default_factory=list)
    seconds: float = 0.0
    failure: BaseException | None = None  # the world's first failure (deadlock, time limit)
    routes: list[tuple[int, int]] = field(default_factory=list)  # (sender, receiver), in order

    @property
    def ok(self) -> bool:
        return self.failure is None and not any(self.errors)

    def first_error(self) -> tuple[int, BaseException] | None:
        """(rank, exception) of the most telling failure: a deadlock or time limit first, then
        the first rank's own error (not another rank's "stopped because someone failed")."""
        if isinstance(self.failure, (DeadlockError, RanksDidNotFinishError)):
            return -1, self.failure
        for rank, error in enumerate(self.errors):
            if error is not None and not isinstance(error, WorldAbortedError):
                return rank, error
        for rank, error in enumerate(self.errors):
            if error is not None:
                return rank, error
        return None


def run_ranks(size: int, function, args=None, allow_collectives: bool = True,
              timeout_s: float = 10.0) -> RankResults:
    """Run ``function(comm, *args[rank])`` on ``size`` ranks (threads); never raises for what
    the ranks do: their return values and exceptions are in the :class:`RankResults`."""
    world = World(size, allow_collectives=allow_collectives, timeout_s=timeout_s)
    args = args if args is not None else [()] * world.size
    if len(args) != world.size:
        raise ValueError(f"args must give one tuple per rank ({world.size}), not {len(args)}")
    returns: list = [None] * world.size
    errors: list = [None] * world.size

    def body(rank: int) -> None:
        try:
            returns[rank] = function(world.comms[rank], *args[rank])
            left_open = world.open_requests[rank]
            if left_open:
                raise RequestsNotCompletedError(
                    f"rank {rank} returned with {len(left_open)} request"
                    f"{'s' if len(left_open) > 1 else ''} never completed "
                    f"({', '.join(r.what for r in left_open[:3])}"
                    f"{', ...' if len(left_open) > 3 else ''}): MPI requires a Wait (or a Test "
                    "that succeeds) for every Isend and Irecv, and only then may the buffer be "
                    "used")
        except BaseException as error:  # noqa: BLE001 - the learner's code: report, don't crash
            errors[rank] = error
            if not isinstance(error, (WorldAbortedError, DeadlockError, RanksDidNotFinishError)):
                world.fail(error)  # the others stop at their next message
        finally:
            world.finished(rank)

    threads = [threading.Thread(target=body, args=(rank,), daemon=True,
                                name=f"gpulab-rank-{rank}") for rank in range(world.size)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = start + timeout_s + 1.0
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.perf_counter()))
    stuck = [rank for rank, thread in enumerate(threads) if thread.is_alive()]
    if stuck:
        world.fail(RanksDidNotFinishError(
            f"rank{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} did not finish "
            f"within {timeout_s:g} s (a loop that never ends, outside any message?)"))
        for rank in stuck:
            threads[rank].join(timeout=0.5)
    return RankResults(world.size, returns, errors, list(world.bytes_sent),
                       list(world.messages_sent), time.perf_counter() - start, world.failure,
                       list(world.routes))


__all__ = ["ANY_SOURCE", "ANY_TAG", "COLLECTIVES", "CollectiveNotAllowedError", "Comm",
           "CommError", "DeadlockError", "RankResults", "RanksDidNotFinishError", "Request",
           "RequestsNotCompletedError",
           "StandInMPI", "TruncationError", "UNDEFINED", "World", "WorldAbortedError", "run_ranks"]
