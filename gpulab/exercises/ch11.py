"""Chapter 11's exercises: a ring all-reduce from point-to-point messages, and its cost.

- :func:`check_ring_allreduce` takes your ``ring_allreduce(comm, x)``: every rank passes its
  own vector ``x``; every rank must get back the element-wise **mean** over the ranks, by a
  ring of messages (reduce-scatter, then all-gather), without changing ``x``. It runs your
  function on 2 to 5 ranks simulated as threads (:mod:`gpulab.parallel.simulated`: mpi4py's
  ``Send``/``Recv``/``Sendrecv``/``Isend``/``Irecv``, no collectives), on random vectors whose
  length is not a multiple of the number of ranks. ``Send`` there waits for the receiver (MPI
  allows it to), and a deadlock stops every rank at once with a message instead of hanging.
  The bytes every rank sends are counted: a ring sends 2(N - 1)/N of the vector.
- :func:`check_allreduce_time` takes your ``ring_allreduce_time(n_bytes, n_ranks, alpha_s,
  beta_bytes_per_s)``: the α–β model of a ring all-reduce,
  :func:`gpulab.parallel.links.ring_allreduce_time`.

Why threads and not MPI for the check: a check must finish, every time, in a second, and say
what went wrong. Under MPI a deadlock hangs until a time-out, small blocking sends do not
deadlock at all (Open MPI buffers them), and a crash takes every process down. After the check
passes, the chapter runs the same function on real MPI ranks
(:func:`gpulab.experiments.many_gpus.run_your_ring`).
"""

from __future__ import annotations

import math

import numpy as np

from gpulab.exercises.checks import (
    READ_THE_ERROR_HINT,
    STUB_MESSAGE,
    CheckFailedError,
    CheckResult,
    NotAttemptedError,
    call_learner,
    run_check,
)
from gpulab.parallel import collectives, links, simulated

RING_STUB_HINT = (
    "cut x into comm.Get_size() chunks, then N - 1 steps of reduce-scatter (send one chunk to "
    "the right, add the chunk that arrives from the left) and N - 1 steps of all-gather (pass "
    "the finished chunks on); divide by N at the end."
)
DEADLOCK_SEND_HINT = (
    "every rank called Send first, and Send may wait until the receiver takes the message "
    "(MPI allows it; Open MPI does it for large messages): all ranks wait to send, none "
    "receives. Use comm.Sendrecv(sendbuf, dest=right, recvbuf=buffer, source=left), which "
    "sends and receives at once, or let even ranks send first and odd ranks receive first."
)
DEADLOCK_RECV_HINT = (
    "every rank waits to receive before anyone has sent. Send to the right and receive from "
    "the left in one call, comm.Sendrecv(...), or let even ranks send first."
)
DEADLOCK_HINT = (
    "the ranks wait for each other in a cycle: a message one rank waits for is never sent, or "
    "sent to another rank. Every rank should send to (rank + 1) % N and receive from "
    "(rank - 1) % N the same number of times, best with comm.Sendrecv."
)
TRUNCATION_HINT = (
    "a rank received a longer message than its buffer: the chunk a rank sends and the chunk "
    "its neighbour expects at that step are not the same one (check the chunk index on both "
    "sides: an off-by-one?). With a length that is not a "
    "multiple of N the chunks differ in length: compute every chunk's bounds the same way on "
    "every rank (np.array_split does), and size the receive buffer for the chunk that arrives."
)
BROADCAST_HINT = (
    "a chunk you received does not have the length of the part you add it to: the chunk "
    "that arrives at a step is not the one you add it into (check the chunk indices on both "
    "sides), or the chunks are cut differently on different ranks."
)
COLLECTIVE_HINT = (
    "the exercise is to build the all-reduce yourself: use comm.Sendrecv (or Send and Recv, or "
    "Isend and Irecv) between neighbours on the ring."
)
NO_DIVIDE_HINT = (
    "every rank holds the sum over the ranks, not the mean: divide by comm.Get_size() at the "
    "end (the data-parallel step averages the gradients)."
)
HALF_HINT = (
    "each rank holds one finished chunk and the others unfinished: that is the end of the "
    "reduce-scatter. Now the all-gather: N - 1 more steps in which each rank passes on the "
    "finished chunk it has (then the one it just received), overwriting, not adding."
)
REMAINDER_HINT = (
    "the last n % N elements are wrong: the chunks must cover every element even when n is not "
    "a multiple of N (n // N elements per chunk leaves a remainder). np.array_split, or bounds "
    "from divmod(n, N), cover them all."
)
SAME_WRONG_HINT = (
    "every rank ends with the same wrong vector: the all-gather spread the chunks, but the "
    "reduce-scatter added into the wrong ones. At each step a rank adds the chunk that arrives "
    "into its copy of that same chunk: check the index you add into (an off-by-one?)."
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
MANY_MESSAGES_HINT = (
    "send each chunk as one message: every message pays the link's latency α, so a ring sends "
    "2(N - 1) messages per rank, not one per element."
)
COPY_HINT = (
    "your function changed x: work on a copy (np.array(x) or x.copy()); the caller still needs "
    "its own vector, as MPI_Allreduce leaves its send buffer alone."
)
TIME_STUB_HINT = (
    "2(N - 1) steps, each paying the latency alpha_s and sending one chunk of n_bytes / N at "
    "beta_bytes_per_s."
)
TOLERANCE = 1e-10


def _ring_diagnosis(outcome, n_ranks: int) -> tuple[str, str]:
    """(message, hint) for a run that raised."""
    rank, error = outcome.first_error()
    who = "" if rank < 0 else f" on rank {rank}"
    if isinstance(error, simulated.DeadlockError):
        text = str(error)
        waits = [part for part in text.split(";") if "waits in" in part]
        if waits and all(" Send to" in w or " send to" in w for w in waits):
            hint = DEADLOCK_SEND_HINT
        elif waits and all("Recv from" in w or "recv from" in w for w in waits):
            hint = DEADLOCK_RECV_HINT
        else:
            hint = DEADLOCK_HINT
        return f"the ranks deadlocked ({n_ranks} ranks): {text}", hint
    if isinstance(error, simulated.TruncationError):
        return f"{error}.", TRUNCATION_HINT
    if isinstance(error, simulated.CollectiveNotAllowedError):
        return f"{error}.", COLLECTIVE_HINT
    if isinstance(error, simulated.RanksDidNotFinishError):
        return (f"your function did not finish: {error}.",
                "every loop must end after N - 1 steps per phase; a rank stuck in a loop "
                "without messages never returns.")
    if isinstance(error, ValueError) and "broadcast" in str(error):
        return f"your function stopped{who} with ValueError: {error}.", BROADCAST_HINT
    return (f"your function stopped{who} with {type(error).__name__}: {error}.",
            READ_THE_ERROR_HINT)


def _chunks_right(out: np.ndarray, want: np.ndarray, size: int) -> list[bool]:
    return [np.allclose(out[a:b], want[a:b], rtol=TOLERANCE, atol=TOLERANCE)
            or np.allclose(out[a:b], size * want[a:b], rtol=TOLERANCE, atol=TOLERANCE)
            for a, b in collectives.chunk_bounds(len(want), size)]


def _values_diagnosis(outs, want, size: int, n: int, where: str) -> tuple[str, str]:
    close = [np.allclose(o, want, rtol=TOLERANCE, atol=TOLERANCE) for o in outs]
    rank = close.index(False)
    if all(np.allclose(o, size * want, rtol=TOLERANCE, atol=TOLERANCE) for o in outs):
        return f"every rank returned the sum over the {size} ranks ({where}).", NO_DIVIDE_HINT
    finished = [_chunks_right(o, want, size) for o in outs]
    if all(sum(f) == 1 for f in finished) and len({f.index(True) for f in finished}) == size:
        return (f"each rank holds only one finished chunk ({where}): rank 0 chunk "
                f"{finished[0].index(True)}, rank 1 chunk {finished[1].index(True)}, …",
                HALF_HINT)
    tail = size * (n // size)
    wrong = np.flatnonzero(~np.isclose(outs[rank], want, rtol=TOLERANCE, atol=TOLERANCE))
    if n % size and all(np.allclose(o[:tail], want[:tail], rtol=TOLERANCE, atol=TOLERANCE)
                        for o in outs):
        which = f"element {tail} is" if n - tail == 1 else f"elements {tail}..{n - 1} are"
        return (f"{which} wrong, the last {n - tail} of {n} ({where}).", REMAINDER_HINT)
    span = f"{wrong[0]}..{wrong[-1]}" if len(wrong) > 1 else f"{wrong[0]}"
    message = (f"rank {rank} is wrong at {len(wrong)} of {n} elements ({span}; {where}): "
               f"expected {want[wrong[0]]:.6g} at element {wrong[0]}, got "
               f"{outs[rank][wrong[0]]:.6g}.")
    if all(np.allclose(o, outs[0], rtol=TOLERANCE, atol=TOLERANCE) for o in outs):
        return message, SAME_WRONG_HINT
    return message, WRONG_HINT


def _ring_trials(rng: np.random.Generator) -> list[tuple[int, int]]:
    trials = []
    for size in (3, 4, 2, 5):
        while True:
            n = int(rng.integers(size + 1, 160))
            if n % size:
                break
        trials.append((size, n))
    return trials


def _run_ring(function, size: int, xs):
    return simulated.run_ranks(size, lambda comm, x: function(comm, x),
                               [(x,) for x in xs], allow_collectives=False, timeout_s=10.0)


def check_ring_allreduce(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(comm, x)`` on rings of 3, 4, 2 and 5 ranks (threads), random float64
    vectors of random lengths that are not multiples of N.

    Diagnoses: the stub; a deadlock (blocking sends in the same order on every rank, or
    receives); a message longer than its buffer; collectives; the sum instead of the mean; only
    the reduce-scatter; the remainder elements left out; wrong chunk indices; x changed; the
    whole vector sent instead of chunks; one message per element."""

    def body(seed: int) -> str:
        if function is None or function is Ellipsis or not callable(function):
            call_learner(function, stub_hint=RING_STUB_HINT)
        rng = np.random.default_rng(seed)
        described = []
        for size, n in _ring_trials(rng):
            xs = [rng.standard_normal(n) for _ in range(size)]
            originals = [x.copy() for x in xs]
            where = f"{size} ranks, {n} elements, seed={seed}"
            outcome = _run_ring(function, size, xs)
            if any(isinstance(e, NotImplementedError) for e in outcome.errors):
                raise NotAttemptedError(STUB_MESSAGE.format(what="function"), RING_STUB_HINT)
            if outcome.first_error():
                message, hint = _ring_diagnosis(outcome, size)
                raise CheckFailedError(f"{message} ({where})", hint)
            want = np.mean(np.stack(originals), axis=0)
            outs = []
            for rank, got in enumerate(outcome.returns):
                if got is None:
                    raise CheckFailedError(f"rank {rank} returned None ({where}).",
                                           "return the averaged vector (a NumPy array of x's "
                                           "length) on every rank.")
                out = np.asarray(got)
                if out.shape != want.shape:
                    raise CheckFailedError(
                        f"rank {rank} returned shape {out.shape}, x has shape {want.shape} "
                        f"({where}).", "return one value per element of x, on every rank.")
                if not np.issubdtype(out.dtype, np.floating) or out.dtype != np.float64:
                    raise CheckFailedError(
                        f"rank {rank} returned {out.dtype} values; x is float64 ({where}).",
                        "keep x's dtype: make the copy with np.array(x) (or x.copy()), "
                        "and receive into buffers of x.dtype.")
                outs.append(out)
            for rank, (x, original) in enumerate(zip(xs, originals, strict=True)):
                if not np.array_equal(x, original):
                    raise CheckFailedError(f"rank {rank}'s x was changed ({where}).", COPY_HINT)
            if not all(np.allclose(o, want, rtol=TOLERANCE, atol=TOLERANCE) for o in outs):
                message, hint = _values_diagnosis(outs, want, size, n, where)
                raise CheckFailedError(message, hint)
            ring = collectives.ring_bytes_sent(n, size, 8)
            allowed = 2 * (size - 1) * math.ceil(n / size) * 8
            for rank, sent in enumerate(outcome.bytes_sent):
                if sent > allowed:
                    whole = (size - 1) * n * 8
                    raise CheckFailedError(
                        f"right answer, but rank {rank} sent {sent:,} bytes of a {n * 8:,}-byte "
                        f"vector; a ring sends {ring[rank]:,} ({where}).",
                        NAIVE_HINT if sent >= whole else
                        "more than a ring needs: send each chunk once per step, 2(N - 1) "
                        "chunks in all.")
            most = max(outcome.messages_sent)
            if most > 2 * (size - 1):
                raise CheckFailedError(
                    f"right answer, but a rank sent {most} messages; a ring sends "
                    f"{2 * (size - 1)} per rank ({where}).", MANY_MESSAGES_HINT)
            described.append(f"{size} ranks × {n} elements")
        return (f"the mean on every rank, {', '.join(described)}; each rank sent 2(N - 1) "
                f"chunks, 2(N - 1)/N of the vector (seed={seed}).")

    return run_check("ring_allreduce", body, seed, show)


def try_ring(function, ranks: int = 3, n: int = 7, seed: int = 0) -> None:
    """Run ``function`` once on ``ranks`` simulated ranks and print each rank's vector, what it
    returned and what it sent; "not written yet" for the stub."""
    rng = np.random.default_rng(seed)
    xs = [np.round(rng.uniform(0, 10, n), 1) for _ in range(ranks)]
    outcome = _run_ring(function, ranks, [x.copy() for x in xs])
    if any(isinstance(e, NotImplementedError) for e in outcome.errors):
        print("not written yet")
        return
    print(f"{ranks} ranks (threads), x of {n} elements each; want the mean "
          f"{np.round(np.mean(xs, axis=0), 4)}")
    if outcome.first_error():
        message, _ = _ring_diagnosis(outcome, ranks)
        print("stopped:", message)
        return
    for rank, (x, got) in enumerate(zip(xs, outcome.returns, strict=True)):
        shown = np.round(np.asarray(got), 4) if got is not None else None
        print(f"rank {rank}: x = {x}  ->  {shown}   sent {outcome.bytes_sent[rank]} bytes in "
              f"{outcome.messages_sent[rank]} messages")


# --- exercise 2: the cost of a ring all-reduce -------------------------------------------------


def _time_cases(rng: np.random.Generator) -> list[tuple[float, int, float, float]]:
    cases = []
    for ranks in (8, 3, 72, 2, 1024, 1):
        n_bytes = float(10 ** rng.uniform(3, 10))
        alpha = float(10 ** rng.uniform(-7, -5))
        beta = float(10 ** rng.uniform(9, 12))
        cases.append((n_bytes, ranks, alpha, beta))
    return cases


def check_allreduce_time(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(n_bytes, n_ranks, alpha_s, beta_bytes_per_s)`` against
    :func:`gpulab.parallel.links.ring_allreduce_time` for 8, 3, 72, 2, 1024 and 1 ranks with
    random sizes, latencies and bandwidths.

    Diagnoses: the stub; only the reduce-scatter half; the whole buffer sent at every step; N
    steps instead of N - 1; the latency paid once, or not at all; 2·n/β without (N - 1)/N; a
    cost for one rank; not a number."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        for n_bytes, ranks, alpha, beta in _time_cases(rng):
            got = call_learner(function, n_bytes, ranks, alpha, beta, stub_hint=TIME_STUB_HINT,
                               call=f"ring_allreduce_time({n_bytes:.4g}, {ranks}, {alpha:.3g}, "
                                    f"{beta:.3g})")
            where = (f"{n_bytes:,.0f} bytes, {ranks} ranks, α = {alpha * 1e6:.3g} µs, "
                     f"β = {beta / 1e9:.3g} GB/s, seed={seed}")
            if isinstance(got, bool) or not isinstance(got, (int, float, np.integer,
                                                             np.floating)):
                raise CheckFailedError(f"expected a number of seconds, got {got!r} ({where}).",
                                       "return the time as a float.")
            want = links.ring_allreduce_time(n_bytes, ranks, alpha, beta)
            if math.isclose(float(got), want, rel_tol=1e-9, abs_tol=1e-15):
                continue
            if ranks == 1:
                raise CheckFailedError(
                    f"one rank has nothing to exchange: expected 0 s, got {float(got):.4g} s "
                    f"({where}).", "with N = 1 there are 2(N - 1) = 0 steps: return 0.")
            n = ranks
            steps = 2 * (n - 1)
            suspects = [
                ((n - 1) * alpha + (n - 1) / n * n_bytes / beta,
                 "that is the reduce-scatter alone: the all-gather takes as many steps and "
                 "bytes again, so both terms have a factor 2."),
                (steps * alpha + steps * n_bytes / beta,
                 "each step sends one chunk, n_bytes / N, not the whole buffer."),
                (2 * n * alpha + steps / n * n_bytes / beta,
                 "each phase has N - 1 steps, not N: the latency term is 2(N - 1)·α."),
                (alpha + steps / n * n_bytes / beta,
                 "every one of the 2(N - 1) steps is a message and pays α, not just the first."),
                (steps / n * n_bytes / beta,
                 "the latency term is missing: each of the 2(N - 1) messages costs α on top."),
                (steps * alpha + 2 * n_bytes / beta,
                 "2·n/β is the limit for very many ranks; for N ranks it is 2(N - 1)/N · n/β."),
                (steps * alpha + steps / n * n_bytes * beta,
                 "bytes divided by bandwidth (bytes per second) gives seconds: n / β."),
            ]
            hint = next((h for value, h in suspects
                         if math.isclose(float(got), value, rel_tol=1e-9)), TIME_STUB_HINT)
            raise CheckFailedError(f"expected {want:.6g} s, got {float(got):.6g} s ({where}).",
                                   hint)
        return f"right for 8, 3, 72, 2, 1,024 and 1 ranks (seed={seed})."

    return run_check("ring_allreduce_time", body, seed, show)


__all__ = ["check_allreduce_time", "check_ring_allreduce", "try_ring"]
