"""Chapter 11's exercises: a ring all-reduce from point-to-point messages, its reduce step as a
kernel, and its cost.

- :func:`check_ring_allreduce`: exercise 1, ``ring_allreduce(comm, x)``, the mean of x over
  the ranks by a ring of messages (reduce-scatter, then all-gather), run on ranks simulated as
  threads (:mod:`gpulab.parallel.simulated`).
- :func:`check_add_chunk`: exercise 2, the kernel ``add_chunk(data, incoming, offset, length)``,
  the ring's reduce step on the device. :func:`run_ring_on_kernel` then runs a ring all-reduce
  whose every reduce step launches your kernel on each rank (gpulab's own, with a note, until
  yours has passed).
- :func:`check_allreduce_time`: exercise 3, ``ring_allreduce_time(n_bytes, n_ranks, alpha_s,
  beta_bytes_per_s)``, the α–β model of a ring all-reduce.

Why threads and not MPI for the check: a check must finish, every time, in a second, and say
what went wrong. Under MPI a deadlock hangs until a time-out, small blocking sends do not
deadlock at all (Open MPI buffers them), and a crash takes every process down. After the check
passes, the chapter runs the same function on real MPI ranks
(:func:`gpulab.experiments.many_gpus.run_your_ring`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import math
import sys
import types
from dataclasses import dataclass

import numpy as np

from gpulab.exercises.evidence import expected_got, is_number, shown_apart
from gpulab.exercises.grid_stride import more_than_their_share, written_by_several
from gpulab.exercises.learner_code import watching_calls
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.outputs import elementwise_tolerance
from gpulab.exercises.results import (
    READ_THE_ERROR_HINT,
    STUB_MESSAGE,
    CheckFailedError,
    KernelError,
    NotAttemptedError,
)
from gpulab.exercises.running import call_learner, launch, padded, read_back
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, try_launch, under_two_blocks
from gpulab.exercises.trial import Trial
from gpulab.parallel import collectives, links, simulated

# --- exercise 1: a ring all-reduce -------------------------------------------------------------

RING_STUB_HINT = (
    "cut x into comm.Get_size() chunks, then N - 1 steps of reduce-scatter (send one chunk to "
    "the right, add the chunk that arrives from the left) and N - 1 steps of all-gather (pass "
    "the finished chunks on); divide by N at the end."
)
DEADLOCK_SEND_HINT = (
    "every rank called Send first, and Send may wait until the receiver takes the message "
    "(MPI allows it; Open MPI does it for large messages): all ranks wait to send, none "
    "receives. Revisit the section on point-to-point calls: one call sends and receives at "
    "once (Sendrecv); a non-blocking send or receive posted before the blocking call also "
    "works; or even and odd ranks can take turns."
)
DEADLOCK_RECV_HINT = (
    "every rank waits to receive before anyone has sent. A call that sends and receives at "
    "once (Sendrecv), a non-blocking receive posted first (Irecv), or even and odd ranks "
    "taking turns breaks the cycle."
)
ISEND_WAIT_HINT = (
    "every rank waited for its Isend to complete before it posted a receive: a send "
    "completes only when its receiver takes the message, so all ranks wait for each other. "
    "Post the receive before you wait for the send (a non-blocking receive, or a blocking "
    "one between starting the send and waiting for it)."
)
DEADLOCK_HINT = (
    "the ranks wait for each other in a cycle: a message one rank waits for is never sent, or "
    "sent to another rank, or a request is never completed. Every rank should send to its "
    "right neighbour and receive from its left the same number of times, and wait for every "
    "request it started."
)
TRUNCATION_HINT = (
    "a rank received a longer message than its buffer: the chunk a rank sends and the chunk "
    "its neighbour expects at that step are not the same one (check the chunk index on both "
    "sides: an off-by-one?). With a length that is not a multiple of N the chunks differ in "
    "length: compute every chunk's bounds the same way on every rank, and size the receive "
    "buffer for the chunk that arrives."
)
BROADCAST_HINT = (
    "a chunk you received does not have the length of the part you add it to: the chunk "
    "that arrives at a step is not the one you add it into (check the chunk indices on both "
    "sides), or the chunks are cut differently on different ranks."
)
COLLECTIVE_HINT = (
    "the exercise is to build the all-reduce yourself: exchange chunks between neighbours on "
    "the ring with point-to-point calls (Sendrecv, or Send and Recv, or Isend and Irecv)."
)
REQUESTS_HINT = (
    "a non-blocking call only starts a transfer: wait for every request it returns (Wait, "
    "or Waitall for several) before you read a receive buffer, change a send buffer or "
    "return. Until then the incoming chunk may not have arrived."
)
OUT_OF_RANGE_HINT = (
    "a rank named a partner that does not exist: with N ranks they are 0 to N - 1, and the "
    "ring closes on itself (rank N - 1's right neighbour is rank 0). A partner found by "
    "flipping bits of the rank (recursive halving) exists only for a power of two of ranks."
)
NOT_FINISHED_HINT = (
    "every loop must end after N - 1 steps per phase; a rank stuck in a loop without messages "
    "never returns."
)
RING_ROUTE_HINT = (
    "in a ring each rank sends only to its right neighbour and receives only from its left, "
    "and a chunk travels one hop per step (section 2's schedule). Exchanging with other "
    "partners can give the right mean with the same bytes, but it is another algorithm: its "
    "messages cross the machine instead of using each link once in each step."
)
ROOT_HINT = (
    "routes that meet at one rank are what the ring avoids: that rank receives (N - 1) whole "
    "vectors while the others idle. In a ring every rank sends one chunk to its right and "
    "receives one from its left at every step."
)
EVERYONE_HINT = (
    "that is the everyone-to-everyone exchange section 2 starts from: each rank talks to all "
    "N - 1 others. In a ring each rank talks only to its two neighbours, sending to the right "
    "and receiving from the left, and each chunk goes round one hop per step."
)
DIRECTION_HINT = (
    "a ring runs one way round: every message of both phases goes to the right neighbour "
    "(and each rank receives from its left). Going back the other way is a different, "
    "bidirectional schedule, and its chunk indices are not those of section 2."
)
NO_DIVIDE_HINT = (
    "every rank holds the sum over the ranks, not the mean: divide by the number of ranks at "
    "the end (the data-parallel step averages the gradients)."
)
HALF_HINT = (
    "each rank holds one finished chunk and the others unfinished: that is the end of the "
    "reduce-scatter. Now the all-gather: N - 1 more steps in which each rank passes on the "
    "finished chunk it has (then the one it just received), overwriting, not adding."
)
REMAINDER_HINT = (
    "the last n % N elements are wrong: the chunks must cover every element even when n is not "
    "a multiple of N (n // N elements per chunk leaves a remainder): let some chunks be one "
    "element longer."
)
SAME_WRONG_HINT = (
    "every rank ends with the same wrong vector: the all-gather spread the chunks, but the "
    "reduce-scatter combined them wrongly. At each step a rank adds the chunk that arrives "
    "into its copy of that same chunk, and does nothing else to it: check the index you add "
    "into (an off-by-one?), and divide by N once, at the end, not at every step."
)
WRONG_HINT = (
    "draw the ring for N = 3 on paper: at each step, which chunk does each rank send, and which "
    "does it receive? After N - 1 reduce-scatter steps each rank should hold a different, "
    "finished chunk; the all-gather then passes finished chunks on. Compare with the try-it "
    "cell's output."
)
NAIVE_HINT = (
    "right answer, but not a ring: your ranks sent the whole vector again and again. In a ring "
    "each rank sends 2(N - 1) chunks of about n/N elements — 2(N - 1)/N of the vector, less "
    "than twice its size however many ranks there are."
)
MORE_BYTES_HINT = "more than a ring needs: send each chunk once per step, 2(N - 1) chunks in all."
MANY_MESSAGES_HINT = (
    "send each chunk as one message: every message pays the link's latency α, so a ring sends "
    "2(N - 1) messages per rank, not one per element."
)
COPY_HINT = (
    "your function changed x: work on a copy of it; the caller still needs its own vector, as "
    "MPI_Allreduce leaves its send buffer alone."
)
RETURN_HINT = "return the averaged vector (a NumPy array of x's length) on every rank."
SHAPE_HINT = "return one value per element of x, on every rank."
DTYPE_HINT = (
    "keep x's dtype, float64: in the copy you work on and in the buffers you receive into."
)
TOLERANCE = 1e-10


def _close(a, b) -> bool:
    return bool(np.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE))


@dataclass
class RingRun:
    """One run of the learner's ring: the ranks, the vectors, what :func:`simulated.run_ranks`
    saw (returns, errors, traffic, every message's sender and receiver)."""

    size: int
    n: int
    seed: int
    originals: list
    xs: list
    outcome: simulated.RankResults

    @property
    def where(self) -> str:
        return f"{self.size} ranks, {self.n} elements, seed={self.seed}"

    @property
    def error(self):
        """(rank, exception) of the run's most telling failure, or None."""
        return self.outcome.first_error()

    def raised(self, kind) -> bool:
        return self.error is not None and isinstance(self.error[1], kind)

    @property
    def error_text(self) -> str:
        return str(self.error[1]) if self.error else ""

    def deadlocked_in(self, *calls: str) -> bool:
        """A deadlock in which every waiting rank waits in one of ``calls``."""
        if not self.raised(simulated.DeadlockError):
            return False
        waits = [part for part in self.error_text.split(";") if "waits in" in part]
        return bool(waits) and all(any(f" {call} " in w for call in calls) for w in waits)

    @property
    def who(self) -> str:
        rank = self.error[0] if self.error else -1
        return "" if rank < 0 else f" on rank {rank}"

    @property
    def want(self) -> np.ndarray:
        return np.mean(np.stack(self.originals), axis=0)

    @property
    def outs(self) -> list:
        return [None if got is None else np.asarray(got) for got in self.outcome.returns]

    def first_rank(self, condition) -> int | None:
        return next((rank for rank, out in enumerate(self.outs) if condition(out)), None)

    def changed_x(self) -> int | None:
        return next((rank for rank, (x, original) in enumerate(zip(self.xs, self.originals,
                                                                   strict=True))
                     if not np.array_equal(x, original)), None)

    # -- who talked to whom --------------------------------------------------------------------

    @property
    def partners(self) -> list[set[int]]:
        """The ranks each rank sent to."""
        sent = [set() for _ in range(self.size)]
        for source, dest in self.outcome.routes:
            sent[source].add(dest)
        return sent

    def off_ring(self) -> tuple[int, int] | None:
        """The first message to a rank that is not a neighbour of its sender."""
        return next(((s, d) for s, d in self.outcome.routes
                     if d not in ((s + 1) % self.size, (s - 1) % self.size)), None)

    def both_ways(self) -> int | None:
        """With N >= 3: the first rank that sent both to its right and to its left, or None
        when one direction is kept (every message to the right, or every one to the left)."""
        if self.size < 3:
            return None
        rights = {(s + 1) % self.size == d for s, d in self.outcome.routes}
        if len(rights) < 2:
            return None
        return next((r for r, sent in enumerate(self.partners)
                     if {(r + 1) % self.size, (r - 1) % self.size} <= sent), 0)

    def runs_each_way(self) -> bool:
        """Every rank sent N - 1 messages to one neighbour, then N - 1 to its other neighbour
        (a ring's phase each way round): on 3 ranks those two are everyone, but the order of
        the messages tells a bidirectional ring from an everyone-to-everyone exchange."""
        for rank in range(self.size):
            sent = [d for s, d in self.outcome.routes if s == rank]
            half = self.size - 1
            if (len(sent) != 2 * half or len(set(sent[:half])) != 1
                    or len(set(sent[half:])) != 1 or sent[0] == sent[-1]
                    or {sent[0], sent[-1]} != {(rank + 1) % self.size, (rank - 1) % self.size}):
                return False
        return True

    def everyone(self) -> bool:
        others = [set(range(self.size)) - {r} for r in range(self.size)]
        return (self.size >= 3 and all(o <= p for o, p in zip(others, self.partners, strict=True))
                and not self.runs_each_way())

    def root(self) -> int | None:
        """With N >= 3: a rank that received from every other rank while some rank did not."""
        if self.size < 3:
            return None
        got = [set() for _ in range(self.size)]
        for source, dest in self.outcome.routes:
            got[dest].add(source)
        full = [r for r in range(self.size) if len(got[r]) == self.size - 1]
        return full[0] if full and len(full) < self.size else None

    # -- the values ------------------------------------------------------------------------

    def largest_error(self) -> float:
        """The largest |returned - mean| over the ranks and elements."""
        return max(float(np.max(np.abs(o - self.want))) for o in self.outs)

    def all_close_to(self, factor: float) -> bool:
        return all(o is not None and o.shape == self.want.shape and _close(o, factor * self.want)
                   for o in self.outs)

    def finished(self) -> np.ndarray:
        """(rank, element): does the rank hold the element's mean (or sum)? Judged element by
        element, so that however the learner cut the chunks, they are found."""
        def close(o, want):
            return np.isclose(o, want, rtol=TOLERANCE, atol=TOLERANCE)
        return np.array([close(o, self.want) | close(o, self.size * self.want)
                         for o in self.outs])

    def only_reduce_scatter(self) -> bool:
        """Every element finished on exactly one rank, and no rank holds every element."""
        finished = self.finished()
        return bool(np.all(finished.sum(axis=0) == 1) and finished.any(axis=1).all())

    def finished_text(self, rank: int) -> str:
        held = np.flatnonzero(self.finished()[rank])
        return f"rank {rank} elements {held[0]}..{held[-1]}"

    def factor(self) -> float | None:
        """c when every rank returned c × the mean (c not 1 nor N), else None."""
        if not all(o is not None and o.shape == self.want.shape for o in self.outs):
            return None
        c = float(np.sum(self.outs[0] * self.want) / np.sum(self.want * self.want))
        return c if abs(c - 1) > 1e-6 and abs(c - self.size) > 1e-6 and self.all_close_to(
            c) else None

    def remainder_only(self) -> bool:
        tail = self.size * (self.n // self.size)
        return bool(self.n % self.size) and all(_close(o[:tail], self.want[:tail])
                                                for o in self.outs)

    def wrong_summary(self) -> str:
        want = self.want
        rank = next(r for r, o in enumerate(self.outs) if not _close(o, want))
        out = self.outs[rank]
        wrong = np.flatnonzero(~np.isclose(out, want, rtol=TOLERANCE, atol=TOLERANCE))
        span = f"{wrong[0]}..{wrong[-1]}" if len(wrong) > 1 else f"{wrong[0]}"
        return (f"rank {rank} is wrong at {len(wrong)} of {self.n} elements ({span}): expected "
                f"{shown_apart(want[wrong[0]], out[wrong[0]])} at element {wrong[0]}, got "
                f"{shown_apart(out[wrong[0]], want[wrong[0]])}")

    # -- the traffic -------------------------------------------------------------------------

    @property
    def allowed_bytes(self) -> int:
        return 2 * (self.size - 1) * math.ceil(self.n / self.size) * 8

    def too_many_bytes(self) -> int | None:
        return next((r for r, sent in enumerate(self.outcome.bytes_sent)
                     if sent > self.allowed_bytes), None)

    def bytes_message(self) -> str:
        rank = self.too_many_bytes()
        ring = collectives.ring_bytes_sent(self.n, self.size, 8)
        return (f"right answer, but rank {rank} sent {self.outcome.bytes_sent[rank]:,} bytes of "
                f"a {self.n * 8:,}-byte vector; a ring sends {ring[rank]:,}")

    @property
    def most_messages(self) -> int:
        return max(self.outcome.messages_sent)


def _wrong_values(r: RingRun) -> bool:
    return not all(_close(o, r.want) for o in r.outs)


def _deadlock(did: str, seen, hint: str) -> Mistake:
    return Mistake(did, seen, lambda r: f"the ranks deadlocked: {r.error_text}", hint, "trace")


RING_MISTAKES = (
    _deadlock("blocking sends first on every rank: a deadlock",
              lambda r: r.deadlocked_in("Send", "send"), DEADLOCK_SEND_HINT),
    _deadlock("receives first on every rank: a deadlock",
              lambda r: r.deadlocked_in("Recv", "recv"), DEADLOCK_RECV_HINT),
    _deadlock("an Isend waited for before the receive is posted, on every rank: a deadlock",
              lambda r: r.deadlocked_in("Isend"), ISEND_WAIT_HINT),
    _deadlock("any other deadlock (a request never waited for, a message to the wrong rank)",
              lambda r: r.raised(simulated.DeadlockError), DEADLOCK_HINT),
    Mistake("a rank that never finishes",
            lambda r: r.raised(simulated.RanksDidNotFinishError),
            lambda r: f"your function did not finish: {r.error_text}", NOT_FINISHED_HINT,
            "trace"),
    Mistake("a receive buffer that is not float64 (float32, int)",
            lambda r: r.raised(simulated.TruncationError) and "of float64)" not in r.error_text,
            lambda r: f"{r.error_text}: a buffer of another dtype than x's", DTYPE_HINT, "trace"),
    Mistake("a message longer than its buffer (an off-by-one chunk index, a wrong buffer size)",
            lambda r: r.raised(simulated.TruncationError),
            lambda r: r.error_text, TRUNCATION_HINT, "trace"),
    Mistake("a collective (Allreduce, allgather, ...)",
            lambda r: r.raised(simulated.CollectiveNotAllowedError),
            lambda r: r.error_text, COLLECTIVE_HINT, "trace"),
    Mistake("Isend or Irecv requests never completed (no Wait)",
            lambda r: r.raised(simulated.RequestsNotCompletedError),
            lambda r: r.error_text.split(": MPI")[0], REQUESTS_HINT, "trace"),
    Mistake("a partner rank that does not exist (no modulo; bit-flipped partners for N not a "
            "power of two)",
            lambda r: r.raised(simulated.CommError) and "but the ranks are" in r.error_text,
            lambda r: r.error_text.split(": take")[0], OUT_OF_RANGE_HINT, "trace"),
    Mistake("a received chunk added into a part of another length",
            lambda r: r.raised(ValueError) and "broadcast" in r.error_text,
            lambda r: f"your function stopped{r.who} with ValueError: {r.error_text}",
            BROADCAST_HINT),
    Mistake("any other error",
            lambda r: r.error is not None,
            lambda r: f"your function stopped{r.who} with {type(r.error[1]).__name__}: "
                      f"{r.error_text}", READ_THE_ERROR_HINT),
    Mistake("nothing returned",
            lambda r: r.first_rank(lambda o: o is None) is not None,
            lambda r: f"rank {r.first_rank(lambda o: o is None)} returned None", RETURN_HINT),
    Mistake("a result of another shape",
            lambda r: r.first_rank(lambda o: o.shape != r.want.shape) is not None,
            lambda r: (f"rank {r.first_rank(lambda o: o.shape != r.want.shape)} returned shape "
                       f"{r.outs[r.first_rank(lambda o: o.shape != r.want.shape)].shape}, x has "
                       f"shape {r.want.shape}"), SHAPE_HINT),
    Mistake("a result that is not float64",
            lambda r: r.first_rank(lambda o: o.dtype != np.float64) is not None,
            lambda r: (f"rank {r.first_rank(lambda o: o.dtype != np.float64)} returned "
                       f"{r.outs[r.first_rank(lambda o: o.dtype != np.float64)].dtype} values; "
                       "x is float64"), DTYPE_HINT),
    Mistake("a receive buffer read before its request completed (NaN)",
            lambda r: r.first_rank(lambda o: bool(np.isnan(o).any())) is not None,
            lambda r: (f"rank {r.first_rank(lambda o: bool(np.isnan(o).any()))} returned NaN: "
                       "a receive buffer was read before its request completed (an Irecv's "
                       "buffer holds nothing defined until its Wait; the simulation fills it "
                       "with NaN until then)"),
            "read what an Irecv brings only after its Wait() (or a Test() that returned "
            "True).", "trace"),
    Mistake("x changed in place",
            lambda r: r.changed_x() is not None,
            lambda r: f"rank {r.changed_x()}'s x was changed", COPY_HINT),
    Mistake("a gather to one rank and a broadcast back, or pairs that all meet one rank "
            "(not a ring)",
            lambda r: r.root() is not None,
            lambda r: (f"rank {r.root()} received messages from every other rank, and not every "
                       "rank did: the messages meet at one rank (gathered to it, or exchanged "
                       "in pairs that all include it), not round a ring"),
            ROOT_HINT, "trace"),
    Mistake("every rank exchanging with every other (not a ring)",
            lambda r: r.everyone(),
            lambda r: (f"every rank sent messages to all {r.size - 1} others (rank 0 to ranks "
                       f"{', '.join(map(str, sorted(r.partners[0])))}): an everyone-to-everyone "
                       "exchange, not a ring"), EVERYONE_HINT, "trace"),
    Mistake("pairs that are not neighbours (recursive halving or doubling, rank XOR k)",
            lambda r: r.off_ring() is not None,
            lambda r: (f"rank {r.off_ring()[0]} sent a message to rank {r.off_ring()[1]}, which "
                       f"is not its neighbour on a ring of {r.size} (its neighbours are ranks "
                       f"{(r.off_ring()[0] - 1) % r.size} and {(r.off_ring()[0] + 1) % r.size}): "
                       "a pairwise exchange, not a ring"), RING_ROUTE_HINT, "trace"),
    Mistake("messages both ways round (pairs r XOR 1 on 4 ranks, a phase sent to the left)",
            lambda r: r.both_ways() is not None,
            lambda r: (f"rank {r.both_ways()} sent to its right neighbour "
                       f"{(r.both_ways() + 1) % r.size} and to its left "
                       f"{(r.both_ways() - 1) % r.size}: messages went both ways round, not "
                       "round a ring"), DIRECTION_HINT, "trace"),
    Mistake("the ring worked in float32 (every rank right to float32's rounding only)",
            lambda r: _wrong_values(r) and all(
                o is not None and o.shape == r.want.shape
                and np.allclose(o, r.want, rtol=1e-6, atol=1e-6) for o in r.outs),
            lambda r: (f"every rank returned the mean right to about 7 digits only, float32's "
                       f"precision (largest error {r.largest_error():.2g}): the values went "
                       "through float32 on the way"), DTYPE_HINT),
    Mistake("the sum instead of the mean",
            lambda r: r.all_close_to(r.size),
            lambda r: f"every rank returned the sum over the {r.size} ranks", NO_DIVIDE_HINT),
    Mistake("the sum divided by another number than N (N - 1, n, N twice)",
            lambda r: r.factor() is not None,
            lambda r: (f"every rank returned {r.factor():.4g} × the mean: the sum divided by "
                       f"{r.size / r.factor():.4g}, not by the number of ranks, {r.size}"),
            "the mean is the sum over the ranks divided once by their number, "
            "comm.Get_size()."),
    Mistake("the all-gather adding instead of overwriting",
            lambda r: (_wrong_values(r) and r.only_reduce_scatter() and len(
                r.outcome.messages_sent) == r.size and min(r.outcome.messages_sent)
                >= 2 * (r.size - 1)),
            lambda r: (f"each rank holds only one finished chunk ({r.finished_text(0)}, "
                       f"{r.finished_text(1)}, …), though every rank sent "
                       f"{min(r.outcome.messages_sent)} or more messages, as the two phases "
                       "take: the all-gather ran, but added each chunk it received into the "
                       "rank's own instead of replacing it"),
            "in the all-gather each received chunk is already the finished sum: store it in "
            "place of yours (overwrite), do not add it."),
    Mistake("only the reduce-scatter (no all-gather)",
            lambda r: _wrong_values(r) and r.only_reduce_scatter(),
            lambda r: (f"each rank holds only one finished chunk: {r.finished_text(0)}, "
                       f"{r.finished_text(1)}, …"), HALF_HINT),
    Mistake("the remainder elements (n % N) never reduced",
            lambda r: _wrong_values(r) and r.remainder_only(),
            lambda r: (f"the last {r.n % r.size} of {r.n} elements are wrong (from element "
                       f"{r.size * (r.n // r.size)} on), the others right"), REMAINDER_HINT),
    Mistake("the reduce-scatter overwriting instead of adding",
            lambda r: _wrong_values(r) and all(np.isclose(
                np.stack(r.originals), o * r.size, rtol=TOLERANCE, atol=TOLERANCE).any(axis=0).all()
                for o in r.outs),
            "every element every rank returned is one rank's own value (divided by N), not the "
            "sum over the ranks: in the reduce-scatter, what arrived replaced the partial sums",
            "in the reduce-scatter, add the incoming chunk to the one the rank holds; only the "
            "all-gather overwrites."),
    Mistake("the same wrong vector everywhere (wrong chunk added into in the reduce-scatter)",
            lambda r: _wrong_values(r) and all(_close(o, r.outs[0]) for o in r.outs),
            lambda r: r.wrong_summary(), SAME_WRONG_HINT),
    Mistake("wrong chunk indices (any other wrong values)",
            _wrong_values, lambda r: r.wrong_summary(), WRONG_HINT),
    Mistake("the whole vector sent at every step (right answer, not a ring)",
            lambda r: (r.too_many_bytes() is not None and r.outcome.bytes_sent[
                r.too_many_bytes()] >= (r.size - 1) * r.n * 8),
            lambda r: r.bytes_message(), NAIVE_HINT, "trace"),
    Mistake("more bytes than a ring sends",
            lambda r: r.too_many_bytes() is not None,
            lambda r: r.bytes_message(), MORE_BYTES_HINT, "trace"),
    Mistake("one message per element",
            lambda r: r.most_messages > 2 * (r.size - 1),
            lambda r: (f"right answer, but a rank sent {r.most_messages} messages; a ring sends "
                       f"{2 * (r.size - 1)} per rank"), MANY_MESSAGES_HINT, "trace"),
)

RING = CheckSpec(
    "ring_allreduce", "ring_allreduce(comm, x) -> the mean of x over the ranks",
    RING_STUB_HINT, RING_MISTAKES,
    title="1. a ring all-reduce", call="check_ring_allreduce(ring_allreduce)",
    holds="on 3, 4, 2 and 5 ranks simulated as threads with mpi4py's point-to-point API (no "
          "collectives; `Send` waits for its receiver, `Irecv` posts its receive, as MPI "
          "allows), random float64 vectors whose length is not a multiple of N: every rank "
          "returns the mean, `x` unchanged, every message goes to the sender's neighbour the "
          "same way round, and each rank sends at most 2(N − 1)·⌈n/N⌉ values in 2(N − 1) "
          "messages",
    also="the stub; gpulab's own ring (`collectives.ring_allreduce_mean`) refused; a patched "
         "check caught; a deadlock stopped at once and named, never a hang; mpi4py's "
         "`MPI.Request.Waitall`/`Waitany`/`Testall` accepted on the simulated requests; a "
         "bidirectional ring named as one even on 3 ranks")


def _ring_trials(rng: np.random.Generator) -> list[tuple[int, int]]:
    trials = []
    for size in (3, 4, 2, 5):
        while True:
            n = int(rng.integers(size + 1, 160))
            if n % size:
                break
        trials.append((size, n))
    return trials


# --- mpi4py's own names on the simulated ranks ---------------------------------------------------


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _learner_functions(function) -> list[types.FunctionType]:
    """``function`` and the functions it reaches: helpers it names in its own module, and
    functions held in its closure."""
    found: list[types.FunctionType] = []
    todo = [function]
    while todo and len(found) < 200:
        item = todo.pop()
        while isinstance(item, functools.partial):
            item = item.func
        item = getattr(item, "__func__", item)
        if not isinstance(item, types.FunctionType):
            item = type(item).__call__ if callable(item) else None
        if not isinstance(item, types.FunctionType):
            continue
        item = inspect.unwrap(item)
        if not isinstance(item, types.FunctionType) or any(item is f for f in found):
            continue
        found.append(item)
        names = {n for code in _code_objects(item.__code__) for n in code.co_names}
        todo.extend(value for name in names
                    if isinstance(value := item.__globals__.get(name), types.FunctionType)
                    and value.__globals__ is item.__globals__)
        todo.extend(cell.cell_contents for cell in item.__closure__ or ()
                    if isinstance(getattr(cell, "cell_contents", None), types.FunctionType))
    return found


@contextlib.contextmanager
def _mpi4py_on_simulated_ranks(function):
    """While the learner's ring runs on the simulated ranks, ``mpi4py.MPI`` (imported in the
    function, or a name in its module) is :class:`gpulab.parallel.simulated.StandInMPI`: a
    right ring that waits with ``MPI.Request.Waitall(requests)``, as mpi4py's documentation
    writes it, runs here as it does on real MPI ranks. Everything is put back afterwards.
    mpi4py is imported only when it already was or when the learner's code imports it."""
    functions = _learner_functions(function)
    names = {n for f in functions for code in _code_objects(f.__code__) for n in code.co_names}
    real = sys.modules.get("mpi4py.MPI")
    if real is None and any(name.split(".")[0] == "mpi4py" for name in names):
        try:
            real = importlib.import_module("mpi4py.MPI")
        except Exception:  # noqa: BLE001 - not installed or broken: the learner's import says so
            real = None
    package = sys.modules.get("mpi4py")
    if real is None or package is None:
        yield
        return
    shim = simulated.StandInMPI(real)
    lent = {real: shim, real.Request: shim.Request}
    swapped = []  # (namespace, name, original)
    namespaces = [sys.modules, vars(package)]
    for f in functions:
        if not any(f.__globals__ is n for n in namespaces):
            namespaces.append(f.__globals__)
    try:
        for namespace in namespaces:
            keys = ("mpi4py.MPI",) if namespace is sys.modules else (
                ("MPI",) if namespace is vars(package) else sorted(names))
            for key in keys:
                original = namespace.get(key)
                if any(original is thing for thing in lent):  # identity: globals hold arrays
                    namespace[key] = lent[original]
                    swapped.append((namespace, key, original))
        yield
    finally:
        for namespace, key, original in reversed(swapped):
            if namespace.get(key) is lent[original]:
                namespace[key] = original


def _run_ring(function, size: int, xs):
    """The learner's ring on ``size`` simulated ranks (threads), rank r with ``xs[r]``; each
    rank's call watched as :func:`~gpulab.exercises.running.call_learner` watches one (the
    check's watch reaches the ranks' threads through a copy of this thread's context)."""
    context = contextvars.copy_context()

    def rank(comm, x):
        return context.copy().run(_watched_rank, function, comm, x)

    with _mpi4py_on_simulated_ranks(function):
        return simulated.run_ranks(size, rank, [(x,) for x in xs], allow_collectives=False,
                                   timeout_s=10.0)


def _watched_rank(function, comm, x):
    with watching_calls(handed=(comm, x), threads=False):
        return function(comm, x)


def _stub(outcome) -> bool:
    return any(isinstance(e, NotImplementedError) for e in outcome.errors)


@RING.check
def check_ring_allreduce(function, seed: int | None = None) -> str:
    """Each ring (:func:`_ring_trials`) gives every rank its own random vector of N + 1 to 159
    elements (:func:`gpulab.parallel.simulated.run_ranks`, a 10 s limit). Every message's sender,
    receiver and size is recorded, so that an exchange with other partners fails even when its
    answer and its bytes are right. A right ring written with ``Sendrecv``, ``Send``/``Recv`` by
    parity or ``Isend``/``Irecv`` and ``Wait`` (or mpi4py's ``MPI.Request.Waitall``, see
    :func:`_mpi4py_on_simulated_ranks`) passes."""
    if function is None or function is Ellipsis or not callable(function):
        call_learner(function, stub_hint=RING_STUB_HINT)
    rng = np.random.default_rng(seed)
    described = []
    for size, n in _ring_trials(rng):
        xs = [rng.standard_normal(n) for _ in range(size)]
        originals = [x.copy() for x in xs]
        outcome = _run_ring(function, size, xs)
        if _stub(outcome):
            raise NotAttemptedError(STUB_MESSAGE.format(what="function"), RING_STUB_HINT)
        RING.reject(RingRun(size, n, seed, originals, xs, outcome))
        described.append(f"{size} ranks × {n} elements")
    return (f"the mean on every rank, {', '.join(described)}; every message to the "
            f"neighbour, each rank sent 2(N - 1) chunks, 2(N - 1)/N of the vector "
            f"(seed={seed}).")


def try_ring(function, ranks: int = 3, n: int = 7, seed: int = 0) -> None:
    """Run ``function`` once on ``ranks`` simulated ranks and print each rank's vector, what it
    returned and what it sent, and to whom; "not written yet" for the stub."""
    rng = np.random.default_rng(seed)
    xs = [np.round(rng.uniform(0, 10, n), 1) for _ in range(ranks)]
    outcome = _run_ring(function, ranks, [x.copy() for x in xs])
    if _stub(outcome):
        print("not written yet")
        return
    print(f"{ranks} ranks (threads), x of {n} elements each; want the mean "
          f"{np.round(np.mean(xs, axis=0), 4)}")
    run = RingRun(ranks, n, seed, xs, [x.copy() for x in xs], outcome)
    if outcome.first_error():
        failure = next(m for m in RING_MISTAKES if m.seen(run)).failure(run)
        print("stopped:", failure.message)
        return
    for rank, (x, got) in enumerate(zip(xs, outcome.returns, strict=True)):
        shown = np.round(np.asarray(got), 4) if got is not None else None
        sent_to = ", ".join(map(str, sorted(run.partners[rank]))) or "nobody"
        print(f"rank {rank}: x = {x}  ->  {shown}   sent {outcome.bytes_sent[rank]} bytes in "
              f"{outcome.messages_sent[rank]} messages, to rank {sent_to}")


# --- the reduce step as a kernel (the notebook's exercise 2) -----------------------------------

ADD_CHUNK_STUB_HINT = (
    "each thread takes one element of the chunk: its index counts from the chunk's start, it "
    "does nothing past the chunk's length, and otherwise adds its element of incoming into its "
    "place in data, offset elements from data's start. The hints above the cell go step by "
    "step."
)
ADD_GUARD_HINT = (
    "a thread read or wrote past the end of an array: the chunk has `length` elements, and "
    "incoming only those; the launch has more threads than that (the last block is partial). "
    "Compare the thread's index within the chunk with the chunk's length."
)
ADD_INDEX_HINT = (
    "revisit the global index (chapter 01): a thread's index counts the chunk's elements from "
    "0; its element of incoming has that index, and its element of data is `offset` further on."
)
PAD_VALUE = 1000.0  # in the padding after data and incoming (seen only by a kernel without a guard)


@dataclass
class ChunkAdd:
    """One launch of the learner's reduce step: data before and after, the chunk it got."""

    trial: Trial
    before: np.ndarray
    incoming: np.ndarray
    offset: int
    length: int
    got: np.ndarray

    @property
    def where(self) -> str:
        return f"offset={self.offset}, length={self.length}, data of {self.n}, {self.trial}"

    @property
    def n(self) -> int:
        return self.before.shape[0]

    @property
    def chunk(self) -> slice:
        return slice(self.offset, self.offset + self.length)

    def with_chunk(self, values: np.ndarray, start: int | None = None) -> np.ndarray:
        """data with ``values`` in place of the elements from ``start`` (the offset)."""
        start = self.offset if start is None else start
        out = self.before.copy()
        out[start:start + len(values)] = values
        return out

    def same(self, want: np.ndarray) -> bool:
        rtol, atol = elementwise_tolerance(self.before.dtype)
        return bool(np.allclose(self.got, want, rtol=rtol, atol=atol))

    @property
    def expected(self) -> np.ndarray:
        return self.with_chunk(self.before[self.chunk] + self.incoming)

    def bad(self) -> np.ndarray:
        rtol, atol = elementwise_tolerance(self.before.dtype)
        return np.flatnonzero(~np.isclose(self.got, self.expected, rtol=rtol, atol=atol))

    def outside_changed(self) -> int | None:
        outside = np.ones(self.n, bool)
        outside[self.chunk] = False
        changed = np.flatnonzero(outside & (self.got != self.before))
        return int(changed[0]) if len(changed) else None

    @property
    def short(self) -> int:
        """Elements of the chunk a guard ``offset + i < length`` lets through."""
        return max(self.length - self.offset, 0)

    def first_block_only(self) -> bool:
        t = self.trial.threads_per_block
        return (self.length > t and np.array_equal(self.got[self.offset + t:], self.before[
            self.offset + t:]) and bool(np.all(self.got[self.chunk][:t]
                                                 != self.before[self.chunk][:t])))

    def times_added(self) -> np.ndarray | None:
        """How many times incoming was added into each element of the chunk, when every
        element got it a whole number of times (at least once), else None."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (self.got[self.chunk] - self.before[self.chunk]) / self.incoming
        counts = np.round(ratio)
        if not np.all(np.isfinite(ratio)) or not np.allclose(ratio, counts, atol=1e-6):
            return None
        return counts.astype(int) if counts.min() >= 1 else None

    def operation(self) -> str | None:
        """"minus" or "times" when the chunk is its old values minus or times incoming."""
        return next((word for word, f in (("minus", np.subtract), ("times", np.multiply))
                     if self.same(self.with_chunk(f(self.before[self.chunk], self.incoming)))),
                    None)

    def unchanged_tail(self) -> int:
        """How many of the chunk's last elements alone are wrong, left as they were (0: not
        that)."""
        bad, end = self.bad(), self.offset + self.length
        if not 0 < len(bad) < self.length or bad[0] != end - len(bad) or bad[-1] != end - 1:
            return 0
        return len(bad) if np.array_equal(self.got[bad], self.before[bad]) else 0

    def more_than_once(self) -> int | None:
        """The first element of data that got incoming added more than once."""
        counts = self.times_added()
        if counts is None or counts.max() <= 1:
            return None
        return self.offset + int(np.argmax(counts > 1))

    def wrong_summary(self) -> str:
        bad = self.bad()
        k = int(bad[0])
        part = "inside" if self.offset <= k < self.offset + self.length else "outside"
        return (f"{len(bad)} elements of data are wrong, the first data[{k}] ({part} the chunk "
                f"data[{self.offset}:{self.offset + self.length}]): "
                f"{expected_got(self.expected[k], self.got[k])}")


ADD_CHUNK_MISTAKES = (
    Mistake("nothing added into data (written into incoming, or a local copy)",
            lambda e: np.array_equal(e.got, e.before),
            "data is unchanged: nothing was added into it",
            "the reduce step changes the rank's own vector in place: each thread adds its element "
            "of incoming into data (not into incoming, not into a local variable)."),
    Mistake("the chunk overwritten with incoming (the all-gather's step)",
            lambda e: e.same(e.with_chunk(e.incoming)),
            "data's chunk holds the incoming values: they replaced the rank's own partial sums "
            "instead of being added to them",
            "overwriting is the all-gather's step; the reduce-scatter adds what arrives into what "
            "the rank already holds."),
    Mistake("subtracted or multiplied instead of added", lambda e: e.operation() is not None,
            lambda e: f"data's chunk is its old values {e.operation()} incoming",
            "the reduce step adds the incoming partial sums."),
    Mistake("added more than once (twice; a loop that strides by the block, not the grid)",
            lambda e: e.more_than_once() is not None,
            lambda e: (f"data[{e.more_than_once()}] got incoming added "
                       f"{e.times_added()[e.more_than_once() - e.offset]} times, not once"
                       + (" (every element of the chunk twice)" if set(e.times_added()) == {2}
                          else "")),
            "each element of the chunk has one owner thread, which adds once; a loop over the "
            "chunk must advance by the whole grid's threads (the grid size), not one block's.",
            "outputs"),
    Mistake("the offset ignored (added at data's start)",
            lambda e: e.same(e.with_chunk(e.before[:e.length] + e.incoming, start=0)),
            lambda e: (f"incoming was added into data[0:{e.length}], not into the chunk at "
                       f"offset {e.offset}"), ADD_INDEX_HINT),
    Mistake("the guard compares the position in data with length (the chunk's end cut off)",
            lambda e: 0 < e.short < e.length and e.same(e.with_chunk(
                e.before[e.offset:e.offset + e.short] + e.incoming[:e.short])),
            lambda e: (f"only the first {e.short} of the chunk's {e.length} elements were added, "
                       f"the last {e.offset} (the offset) not"),
            "the guard lets too few threads through: `length` counts the chunk's elements, so "
            "compare it with the thread's index within the chunk, not with its place in data."),
    Mistake("the index from threadIdx.x alone (only the first block's elements)",
            lambda e: e.first_block_only(),
            lambda e: (f"only the first {e.trial.threads_per_block} elements of the chunk "
                       f"changed ({e.trial.blocks} blocks launched)"), ADD_INDEX_HINT),
    Mistake("the chunk's last elements not added (a guard one short; the index as the place in "
            "data)", lambda e: e.unchanged_tail() > 0,
            lambda e: (f"the chunk's last {e.unchanged_tail()} element(s) were not added (data["
                       f"{e.offset + e.length - e.unchanged_tail()}:{e.offset + e.length}] "
                       "unchanged), the others right"),
            "the launch has one thread per element of the chunk: the thread's index counts the "
            "chunk's elements from 0, and the guard lets through every index below length."),
    Mistake("the sum rounded to float32",
            lambda e: len(e.bad()) > 0 and np.allclose(e.got, e.expected, rtol=1e-6, atol=1e-7),
            lambda e: (f"{e.wrong_summary()}: right to about 7 digits only, float32's precision: "
                       "the values were rounded to float32 on the way"),
            "data and incoming are float64: keep the sum in float64 (no float32 on the way)."),
    Mistake("elements outside the chunk changed",
            lambda e: e.outside_changed() is not None,
            lambda e: (f"data[{e.outside_changed()}], outside the chunk data[{e.offset}:"
                       f"{e.offset + e.length}], changed"),
            "only the chunk's elements may change: the other chunks of a rank's vector are "
            "still travelling round the ring. " + ADD_INDEX_HINT),
    Mistake("any other wrong values",
            lambda e: len(e.bad()) > 0, lambda e: e.wrong_summary(), ADD_INDEX_HINT),
)

ADD_CHUNK_SHARE_HINT = (
    "one thread per element of the chunk (or a grid-stride loop over it): thread i adds "
    "incoming[i] into data[offset + i]; no thread loops over the others' elements."
)
ADD_CHUNK_SHARE_MISTAKES = (written_by_several(ADD_CHUNK_SHARE_HINT),
                             more_than_their_share(ADD_CHUNK_SHARE_HINT))
ADD_CHUNK = CheckSpec(
    "add_chunk", "add_chunk(data, incoming, offset, length)", ADD_CHUNK_STUB_HINT,
    ADD_CHUNK_MISTAKES + ADD_CHUNK_SHARE_MISTAKES, parameters=4,
    title="2. the reduce step as a kernel", call="check_add_chunk(add_chunk)",
    holds="`data[offset + i] += incoming[i]` for `i < length`, the rest of `data` unchanged, "
          "one thread per element of the chunk (or a grid-stride loop), guarded, float64, a "
          "chunk length not a multiple of the block, under two block sizes; traced on a small "
          "launch, no thread writing more than its share",
    also="the stub; a missing guard (IndexError in the simulator, the padding on a GPU); "
         "simulator-only code (the compile-for-GPU step); a kernel that does not finish (the "
         "time limit); a hard-coded block size or chunk length; gpulab's own `add_chunk` "
         "refused")


def _launch_add(kernel, trial: Trial, before, incoming, offset, length
                ) -> tuple[np.ndarray, np.ndarray]:
    """One launch on padded arrays: data as the kernel left it, and incoming."""
    d_all, d_data = padded(before, trial.padding, PAD_VALUE)
    d_incoming_all, d_incoming = padded(incoming, trial.padding, PAD_VALUE)
    try:
        launch(kernel, trial, d_data, d_incoming, np.int64(offset), np.int64(length),
               index_hint=ADD_GUARD_HINT)
    except KernelError as error:
        if isinstance(error.cause, IndexError):
            raise CheckFailedError(
                f"a thread went past the end of an array ({error.cause}; data has "
                f"{before.shape[0]} elements, incoming {length}, offset={offset}, "
                f"length={length}, {trial}).", ADD_GUARD_HINT) from None
        raise
    return (read_back(d_all, before.shape, trial, fill=PAD_VALUE, what="data",
                      hint=ADD_GUARD_HINT), d_incoming_all.copy_to_host()[:length])


@ADD_CHUNK.check
def check_add_chunk(kernel, seed: int | None = None, threads_per_block: int | None = None) -> str:
    """Launched with ceil(length / threads_per_block) blocks: length random and not a multiple
    of the (drawn) block size, offset > 0, data going on after the chunk, both arrays padded;
    then again under another block size."""
    source = ADD_CHUNK.start(kernel)

    def run(trial: Trial) -> Trial:
        rng, length = trial.rng, trial.n
        offset, after = int(rng.integers(1, length)), int(rng.integers(1, length))
        before = rng.standard_normal(offset + length + after)
        incoming = rng.standard_normal(length)
        got, incoming_after = _launch_add(kernel, trial, before, incoming, offset, length)
        reject(ADD_CHUNK_MISTAKES, ChunkAdd(trial, before, incoming, offset, length, got))
        if not np.array_equal(incoming_after, incoming):
            raise CheckFailedError(
                f"data is right, but your kernel changed incoming, the chunk the neighbour sent "
                f"(offset={offset}, length={length}, {trial}): it is the receive buffer, "
                "read-only to this step.",
                "add incoming into data, and write data only: the sum belongs in data's "
                "chunk.")
        return trial

    trial = Trial.draw("check_add_chunk", seed, np.float64, block=threads_per_block)
    trial = under_two_blocks(run, trial, source, once=bool(threads_per_block))
    # the method: one thread per element of the chunk, traced on a small launch
    small = Trial.draw("check_add_chunk", seed, np.float64, block=40, shape=(117,))
    reject_unshared_work(ADD_CHUNK_SHARE_MISTAKES, kernel, small, np.zeros(130), np.ones(117),
                         np.int64(5), np.int64(117),
                         output=source.parameters[0] if source.parameters else 0)
    return (f"a chunk of {trial.n} elements added in place, the rest of data untouched "
            f"({trial.launched}, and under a second block size; seed={trial.seed}).")


def try_add_chunk(kernel) -> None:
    """Run your kernel once on a tiny example (data of 10 elements, a chunk of 5 at offset 3,
    blocks of 4 threads) and print data before and after next to NumPy's answer. An error
    becomes one short paragraph."""
    from numba import cuda

    data = np.arange(10, dtype=np.float64)
    incoming = np.full(5, 0.5)
    trial = Trial.draw("try_add_chunk", 0, np.float64, block=4, shape=(5,))
    d_data = cuda.to_device(data)
    if not try_launch(kernel, trial, d_data, cuda.to_device(incoming), np.int64(3),
                      np.int64(5), index_hint=ADD_GUARD_HINT):
        return
    want = data.copy()
    want[3:8] += incoming
    print(f"data before : {data}\nincoming    : {incoming} (offset 3, length 5)")
    print(f"yours after : {d_data.copy_to_host()}\nNumPy's     : {want}")


def run_ring_on_kernel(kernel=None, ranks: int = 4, n: int = 301, seed: int = 0) -> dict:
    """A ring all-reduce on ``ranks`` simulated ranks whose every reduce step launches
    ``kernel`` on each rank's device copy of its vector
    (:func:`gpulab.parallel.device_ring.ring_allreduce_on_device`): yours once it has passed
    :func:`check_add_chunk` in this session, gpulab's ``add_chunk`` otherwise (said so).
    Prints and returns whose kernel ran, the launches and the largest difference from the
    mean."""
    from gpulab.parallel import device_ring

    note = ADD_CHUNK.unpassed_note(kernel, "gpulab's add_chunk runs the reduce steps below")
    if note:
        print(note)
    mine = kernel is not None and not note
    whose = "your add_chunk" if mine else "gpulab's add_chunk"
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(n) for _ in range(ranks)]
    outcome = simulated.run_ranks(
        ranks, lambda comm, x: device_ring.ring_allreduce_on_device(comm, x,
                                                            kernel if mine else None),
        [(x,) for x in xs], allow_collectives=False, timeout_s=60.0)
    rank_error = outcome.first_error()
    if rank_error:
        print(f"the ring stopped on rank {rank_error[0]}: {rank_error[1]}")
        return {"whose": whose, "correct": False}
    want = np.mean(xs, axis=0)
    error = max(float(np.max(np.abs(mean - want))) for mean, _ in outcome.returns)
    launches = [count for _, count in outcome.returns]
    print(f"{ranks} ranks (threads), {n} float64 values each: every reduce step launched "
          f"{whose} ({', '.join(map(str, launches))} launches per rank); the result equals "
          f"the mean on every rank to {error:.1e} (computed in the simulator, not timed).")
    return {"whose": whose, "correct": error < 1e-12, "max_error": error,
            "launches": launches}


# --- the cost of a ring all-reduce (the notebook's exercise 3) -----------------------------------

TIME_STUB_HINT = (
    "2(N - 1) steps, each paying the latency alpha_s and sending one chunk of n_bytes / N at "
    "beta_bytes_per_s."
)
TIME_WRONG_HINT = (
    "count, from section 2, the messages each rank sends one after another and the bytes in "
    "each; every message costs α plus its bytes over β. Check your formula against the napkin "
    "answer (8 MB on 4 ranks is 6 messages of 2 MB)."
)


@dataclass
class TimeAnswer:
    """What ``ring_allreduce_time`` returned for one case."""

    n_bytes: float
    ranks: int
    alpha: float
    beta: float
    got: object
    seed: int

    @property
    def where(self) -> str:
        return (f"{self.n_bytes:,.0f} bytes, {self.ranks} ranks, α = {self.alpha * 1e6:.3g} µs, "
                f"β = {self.beta / 1e9:.3g} GB/s, seed={self.seed}")

    @property
    def want(self) -> float:
        return links.ring_allreduce_time(self.n_bytes, self.ranks, self.alpha, self.beta)

    def right(self) -> bool:
        return math.isclose(float(self.got), self.want, rel_tol=1e-9, abs_tol=1e-15)

    def equals(self, formula) -> bool:
        """A wrong number (N > 1) that ``formula(S, N, α, β)`` gives."""
        if self.ranks == 1 or self.right():
            return False
        value = formula(self.n_bytes, self.ranks, self.alpha, self.beta)
        return math.isclose(float(self.got), value, rel_tol=1e-9)

    @property
    def summary(self) -> str:
        got, want = float(self.got), self.want
        digits = next((d for d in range(6, 16) if f"{got:.{d}g}" != f"{want:.{d}g}"), 17)
        return f"expected {want:.{digits}g} s, got {got:.{digits}g} s"


def _time_formula(formula, hint: str, did: str) -> Mistake:
    return Mistake(did, lambda a: a.equals(formula),
                   lambda a: f"{a.summary}, which is what {did} gives", hint)


TIME_MISTAKES = (
    Mistake("not a number", lambda a: not is_number(a.got),
            lambda a: f"expected a number of seconds, got {a.got!r}",
            "return the time as a float."),
    Mistake("a cost for one rank", lambda a: a.ranks == 1 and not a.right(),
            lambda a: f"one rank has nothing to exchange: expected 0 s, got {float(a.got):.4g} s",
            "with N = 1 there are 2(N - 1) = 0 steps: return 0."),
    _time_formula(lambda S, N, a, b: (N - 1) * a + (N - 1) / N * S / b,
                  "that is the reduce-scatter alone (or the whole time halved, as if links "
                  "that send both ways at once shared the work: β is already each direction's "
                  "rate): the all-gather takes as many steps and bytes again, so both terms "
                  "have a factor 2.", "the reduce-scatter half only (or the time halved)"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * (a + 8 * S / N / b),
                  "n_bytes and β are both in bytes (β in bytes per second): no factor of 8.",
                  "bits for bytes (× 8)"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * (a + S / b),
                  "each step sends one chunk, n_bytes / N, not the whole buffer.",
                  "the whole buffer per step"),
    _time_formula(lambda S, N, a, b: 2 * N * a + 2 * (N - 1) / N * S / b,
                  "each phase has N - 1 steps, not N: the latency term is 2(N - 1)·α.",
                  "N steps instead of N − 1"),
    _time_formula(lambda S, N, a, b: a + 2 * (N - 1) / N * S / b,
                  "every one of the 2(N - 1) steps is a message and pays α, not just the first.",
                  "α paid once"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) / N * S / b,
                  "the latency term is missing, or far too small: each of the 2(N - 1) messages "
                  "costs alpha_s seconds on top (it is in seconds already).",
                  "α not paid at all"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * a * 1e-6 + 2 * (N - 1) / N * S / b,
                  "alpha_s is in seconds already (the α printed in µs is only its display): "
                  "multiplying it by 1e-6 makes each message's latency a million times too "
                  "small.", "α converted from µs a second time (× 1e-6)"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * a + 2 * S / b,
                  "2·n/β is the limit for very many ranks; for N ranks it is 2(N - 1)/N · n/β "
                  "(a chunk of n/(N - 1) bytes per step gives 2·n/β too: a chunk is n/N).",
                  "2n/β without (N − 1)/N (or chunks of n/(N − 1))"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * a + 2 * (N - 1) / N * S * b,
                  "bytes divided by bandwidth (bytes per second) gives seconds: n / β.", "n·β"),
    _time_formula(lambda S, N, a, b: 1e3 * links.ring_allreduce_time(S, N, a, b),
                  "return seconds: that is the time in milliseconds (1,000 times the seconds).",
                  "milliseconds for seconds"),
    _time_formula(lambda S, N, a, b: 1e6 * links.ring_allreduce_time(S, N, a, b),
                  "return seconds: that is the time in microseconds (10⁶ times the seconds).",
                  "microseconds for seconds"),
    _time_formula(lambda S, N, a, b: 2 * (N - 1) * (a + S / N / b * 1e9),
                  "beta_bytes_per_s is in bytes per second already (the GB/s printed is only "
                  "its display): no conversion from GB/s.", "β taken as GB/s (÷ 1e9)"),
    _time_formula(lambda S, N, a, b: 2 * N * (a + S / N / b),
                  "each phase has N - 1 steps, not N: 2(N - 1) messages in all, each of "
                  "n_bytes / N.", "2N steps instead of 2(N − 1)"),
    _time_formula(lambda S, N, a, b: (N - 1) * (a + S / b),
                  "that is every rank sending its whole buffer to each of the others, one "
                  "after another: a ring sends chunks of n_bytes / N, 2(N - 1) of them, "
                  "passed on round the ring.", "the whole buffer to each other rank"),
    Mistake("any other number", lambda a: not a.right(), lambda a: a.summary, TIME_WRONG_HINT),
)

TIME = CheckSpec(
    "ring_allreduce_time", "ring_allreduce_time(n_bytes, n_ranks, alpha_s, beta_bytes_per_s)",
    TIME_STUB_HINT, TIME_MISTAKES,
    title="3. the α–β cost of a ring", call="check_allreduce_time(ring_allreduce_time)",
    holds="2(N − 1)·α + 2(N − 1)/N · n/β for 3, 8, 72, 2, 1,024 and 1 ranks with random sizes, "
          "latencies and bandwidths",
    also="the stub; gpulab's own `links.ring_allreduce_time` refused; a patched check caught")


# The least common multiple of the rank counts the check uses (3, 8, 72, 2, 1,024): every
# n_bytes is a multiple of it, so that whole-byte chunks (n_bytes // N) are exactly n / N.
WHOLE_CHUNKS = math.lcm(3, 8, 72, 2, 1024)


@TIME.check
def check_allreduce_time(function, seed: int | None = None) -> str:
    """Compared with :func:`gpulab.parallel.links.ring_allreduce_time` within a relative 1e-9,
    on sizes of 10^4 to 10^10 bytes (multiples of :data:`WHOLE_CHUNKS`), α of 0.1 to 10 µs and
    β of 1 to 1,000 GB/s (drawn on a log scale)."""
    rng = np.random.default_rng(seed)
    for ranks in (3, 8, 72, 2, 1024, 1):  # 3 first: on 8 ranks 8·n/N is the whole buffer
        n_bytes, alpha, beta = (float(10 ** rng.uniform(*span))
                                for span in ((3, 10), (-7, -5), (9, 12)))
        # whole bytes that every rank count divides: a chunk of n_bytes // N is then n / N
        n_bytes = float(max(1, round(n_bytes / WHOLE_CHUNKS)) * WHOLE_CHUNKS)
        got = call_learner(function, n_bytes, ranks, alpha, beta, stub_hint=TIME_STUB_HINT,
                           call=f"ring_allreduce_time({n_bytes:.4g}, {ranks}, {alpha:.3g}, "
                                f"{beta:.3g})")
        TIME.reject(TimeAnswer(n_bytes, ranks, alpha, beta, got, seed))
    return f"right for 3, 8, 72, 2, 1,024 and 1 ranks (seed={seed})."


__all__ = ["ADD_CHUNK", "ADD_CHUNK_MISTAKES", "RING", "RING_MISTAKES", "TIME", "TIME_MISTAKES",
           "check_add_chunk", "check_allreduce_time", "check_ring_allreduce",
           "run_ring_on_kernel", "try_add_chunk", "try_ring"]
