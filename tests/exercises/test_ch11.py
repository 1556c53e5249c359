"""Chapter 11's checks (the ring all-reduce, its reduce step as a kernel, its α–β cost) against
right answers written in several ways, the stubs and the wrong answers learners write."""

import math
import time

import numpy as np
import pytest

from gpulab.exercises import ch11
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED

# --- ring all-reduce: right answers -------------------------------------------------------------


def ring_allreduce_mean(comm, x):
    """The notebook's solution: Sendrecv with index arrays."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):
        send, receive = chunks[(rank - step) % size], chunks[(rank - step - 1) % size]
        incoming = np.empty(len(receive))
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] += incoming
    for step in range(size - 1):
        send, receive = chunks[(rank - step + 1) % size], chunks[(rank - step) % size]
        incoming = np.empty(len(receive))
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] = incoming
    return data / size


def all_gather_adds(comm, x):
    """Wrong: the all-gather adds what it receives, as the reduce-scatter does."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for step in range(size - 1):
            send = chunks[(rank - step + phase) % size]
            receive = chunks[(rank - step - 1 + phase) % size]
            incoming = np.empty(len(receive))
            comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
            data[receive] += incoming
    return data / size


def ring_with_irecv_isend_waitall(comm, x):
    """Irecv posted, then Isend, then Waitall on both (the usual MPI idiom), from the
    requests' own class (no import)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for s in range(size - 1):
            send, recv = chunks[(rank - s + phase) % size], chunks[(rank - s - 1 + phase) % size]
            incoming = np.empty(len(recv))
            requests = [comm.Irecv(incoming, source=left),
                        comm.Isend(np.ascontiguousarray(data[send]), dest=right)]
            type(requests[0]).Waitall(requests)
            if phase == 0:
                data[recv] += incoming
            else:
                data[recv] = incoming
    return data / size


def ring_with_isend_first_and_waits(comm, x):
    """Isend, then Irecv, then the send's Wait before the receive's: right, since the Irecv
    is posted before anyone waits."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for phase in (0, 1):
        for s in range(size - 1):
            send, recv = chunks[(rank - s + phase) % size], chunks[(rank - s - 1 + phase) % size]
            incoming = np.empty(len(recv))
            sending = comm.Isend(data[send].copy(), dest=(rank + 1) % size)
            receiving = comm.Irecv(incoming, source=(rank - 1) % size)
            sending.Wait()
            receiving.Wait()
            data[recv] = data[recv] + incoming if phase == 0 else incoming
    return data / size


def ring_to_the_left(comm, x):
    """The same ring the other way round: send to the left, receive from the right."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    left, right = (rank - 1) % size, (rank + 1) % size
    for phase in (0, 1):
        for s in range(size - 1):
            send, recv = chunks[(rank + s - phase) % size], chunks[(rank + s + 1 - phase) % size]
            incoming = np.empty(len(recv))
            comm.Sendrecv(np.ascontiguousarray(data[send]), dest=left, recvbuf=incoming,
                          source=right)
            data[recv] = data[recv] + incoming if phase == 0 else incoming
    return data / size


def ring_with_send_recv_by_parity(comm, x):
    """A right answer without Sendrecv: even ranks send first, odd ranks receive first."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    right, left = (rank + 1) % size, (rank - 1) % size

    def exchange(send_idx, recv_idx):
        incoming = np.empty(len(recv_idx))
        outgoing = np.ascontiguousarray(data[send_idx])
        if rank % 2 == 0:
            comm.Send(outgoing, dest=right)
            comm.Recv(incoming, source=left)
        else:
            comm.Recv(incoming, source=left)
            comm.Send(outgoing, dest=right)
        return incoming

    for s in range(size - 1):
        recv = chunks[(rank - s - 1) % size]
        data[recv] += exchange(chunks[(rank - s) % size], recv)
    for s in range(size - 1):
        recv = chunks[(rank - s) % size]
        data[recv] = exchange(chunks[(rank - s + 1) % size], recv)
    return data / size


def ring_with_isend(comm, x):
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x)
    bounds = np.linspace(0, len(x), size + 1).astype(int)  # other chunk boundaries: still fine
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in ("reduce", "gather"):
        for s in range(size - 1):
            if phase == "reduce":
                send_c, recv_c = (rank - s) % size, (rank - s - 1) % size
            else:
                send_c, recv_c = (rank - s + 1) % size, (rank - s) % size
            incoming = np.empty(bounds[recv_c + 1] - bounds[recv_c])
            request = comm.Isend(data[bounds[send_c]:bounds[send_c + 1]].copy(), dest=right)
            comm.Recv(incoming, source=left)
            request.Wait()
            if phase == "reduce":
                data[bounds[recv_c]:bounds[recv_c + 1]] += incoming
            else:
                data[bounds[recv_c]:bounds[recv_c + 1]] = incoming
    return data / size


def _ring_cut_by_int(comm, x, add=True, gather=True, buffer=np.float64, divisor=None,
                     scaled_first=False):
    """Chunks cut at int(k * n / N) (not as np.array_split cuts them), lower-case sendrecv."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x / size if scaled_first else x.copy()
    bounds = [(int(k * len(x) / size), int((k + 1) * len(x) / size)) for k in range(size)]
    for phase in (0, 1) if gather else (0,):
        for s in range(size - 1):
            a, b = bounds[(rank - s + phase) % size]
            c, d = bounds[(rank - s - 1 + phase) % size]
            if buffer is None:
                incoming = comm.sendrecv(data[a:b].copy(), dest=(rank + 1) % size,
                                         source=(rank - 1) % size)
            else:
                incoming = np.empty(d - c, dtype=buffer)
                comm.Sendrecv(data[a:b].copy(), dest=(rank + 1) % size, recvbuf=incoming,
                              source=(rank - 1) % size)
            data[c:d] = data[c:d] + incoming if phase == 0 and add else incoming
    return data if scaled_first else data / (divisor or size)


def ring_divided_first_by_objects(comm, x):
    """Right: each rank divides its own x by N first; chunks sent as Python objects."""
    return _ring_cut_by_int(comm, x, buffer=None, scaled_first=True)


def ring_with_lower_case_isend_irecv(comm, x):
    """Right: mpi4py's object methods without blocking, `isend` and `irecv`, each request's
    `wait()` (the receive's returns the chunk)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.astype(np.float64)
    bounds = np.linspace(0, len(x), size + 1).astype(int)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for step in range(size - 1):
            send_c = (rank - step + phase) % size
            recv_c = (rank - step - 1 + phase) % size
            receiving = comm.irecv(source=left)
            sending = comm.isend(data[bounds[send_c]:bounds[send_c + 1]].copy(), dest=right)
            incoming = receiving.wait()
            sending.wait()
            c, d = bounds[recv_c], bounds[recv_c + 1]
            data[c:d] = data[c:d] + incoming if phase == 0 else incoming
    return data / size


def divided_by_n_minus_one(comm, x):
    return _ring_cut_by_int(comm, x, divisor=comm.Get_size() - 1)


def float32_receive_buffer(comm, x):
    return _ring_cut_by_int(comm, x, buffer=np.float32)


def reduce_scatter_overwrites(comm, x):
    return _ring_cut_by_int(comm, x, add=False)


def no_all_gather_other_chunks(comm, x):
    return _ring_cut_by_int(comm, x, gather=False)


def ring_with_sendrecv_replace(comm, x):
    """Right: every chunk sent in one buffer of the largest chunk's size, replaced in place."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    buffer = np.empty(len(chunks[0]))  # the first chunks are the largest
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for step in range(size - 1):
            send = chunks[(rank - step + phase) % size]
            receive = chunks[(rank - step - 1 + phase) % size]
            buffer[:len(send)] = data[send]
            comm.Sendrecv_replace(buffer, dest=right, source=left)
            if phase == 0:
                data[receive] += buffer[:len(receive)]
            else:
                data[receive] = buffer[:len(receive)]
    return data / size


@pytest.mark.parametrize("function", [ring_allreduce_mean, ring_with_send_recv_by_parity,
                                      ring_with_isend, ring_with_irecv_isend_waitall,
                                      ring_with_isend_first_and_waits, ring_to_the_left,
                                      ring_divided_first_by_objects,
                                      ring_with_lower_case_isend_irecv,
                                      ring_with_sendrecv_replace])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_right_rings_pass(function, seed):
    result = ch11.check_ring_allreduce(function, seed=seed, show=False)
    assert result.status == PASSED, result


# --- right rings that wait with mpi4py's own MPI.Request class methods -------------------------

MPI = None  # the tests below put mpi4py's MPI here, as a notebook's `from mpi4py import MPI` does


def _ring_with(comm, x, wait):
    """The ring with Irecv and Isend at every step, then ``wait(requests)``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in range(2):
        for s in range(size - 1):
            send, recv = chunks[(rank - s + phase) % size], chunks[(rank - s - 1 + phase) % size]
            incoming = np.empty(len(recv))
            wait([comm.Isend(np.ascontiguousarray(data[send]), dest=right),
                  comm.Irecv(incoming, source=left)])
            data[recv] = data[recv] + incoming if phase == 0 else incoming
    return data / size


def ring_mpi4py_waitall_imported_inside(comm, x):
    """`from mpi4py import MPI` in the function, then MPI.Request.Waitall, as mpi4py's docs."""
    from mpi4py import MPI

    return _ring_with(comm, x, MPI.Request.Waitall)


def ring_mpi4py_waitall_module_import(comm, x):
    """MPI imported at the top of the notebook (this module's MPI), buffers as [x, MPI.DOUBLE]."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    for phase in range(2):
        for s in range(size - 1):
            send, recv = chunks[(rank - s + phase) % size], chunks[(rank - s - 1 + phase) % size]
            incoming = np.empty(len(recv))
            requests = [comm.Irecv([incoming, MPI.DOUBLE], source=MPI.ANY_SOURCE),
                        comm.Isend([np.ascontiguousarray(data[send]), MPI.DOUBLE],
                                   dest=(rank + 1) % size)]
            MPI.Request.Waitall(requests)
            data[recv] = data[recv] + incoming if phase == 0 else incoming
    return data / size


def ring_mpi4py_waitany(comm, x):
    """MPI.Request.Waitany until both requests are done; then Testall (already true)."""
    from mpi4py import MPI

    def wait(requests):
        done = {MPI.Request.Waitany(requests) for _ in requests}
        assert done == {0, 1}, done
        assert MPI.Request.Testall(requests)

    return _ring_with(comm, x, wait)


@pytest.fixture
def mpi(monkeypatch):
    real = pytest.importorskip("mpi4py.MPI")
    monkeypatch.setitem(globals(), "MPI", real)
    return real


@pytest.mark.parametrize("function", [ring_mpi4py_waitall_imported_inside,
                                      ring_mpi4py_waitall_module_import, ring_mpi4py_waitany])
@pytest.mark.parametrize("seed", [0, 1, 5])
def test_right_rings_waiting_with_mpi4py_pass_and_mpi4py_is_put_back(mpi, function, seed):
    import sys

    import mpi4py

    result = ch11.check_ring_allreduce(function, seed=seed, show=False)
    assert result.status == PASSED, (result.message, result.hint)
    assert sys.modules["mpi4py.MPI"] is mpi and mpi4py.MPI is mpi and MPI is mpi
    assert "Cannot convert" in _mpi4py_refuses(mpi)


def _mpi4py_refuses(mpi) -> str:
    """What the real MPI.Request.Waitall says about a simulated request, after the check."""
    outcome = ch11.simulated.run_ranks(1, lambda comm: mpi.Request.Waitall(
        [comm.Irecv(np.empty(1), source=0), comm.Isend(np.zeros(1), dest=0)]))
    return str(outcome.first_error()[1])


# --- ring all-reduce: wrong answers -------------------------------------------------------------


def blocking_send_then_recv(comm, x):
    """Send then Recv on every rank: a deadlock when Send waits for its receiver."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        comm.Send(np.ascontiguousarray(data[send]), dest=(rank + 1) % size)
        incoming = np.empty(len(recv))
        comm.Recv(incoming, source=(rank - 1) % size)
        data[recv] += incoming
    return data / size


def _ring(comm, x, reduce_recv_shift=1, divide=True, gather=True, chunking="split", copy=True,
          gather_send_shift=1):
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy() if copy else x
    n = len(x)
    if chunking == "split":
        bounds = [(c[0], c[-1] + 1) if len(c) else (0, 0)
                  for c in np.array_split(np.arange(n), size)]
    else:  # n // size per chunk: the remainder is never touched
        step = n // size
        bounds = [(k * step, (k + 1) * step) for k in range(size)]
    right, left = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        a, b = bounds[(rank - s) % size]
        c, d = bounds[(rank - s - reduce_recv_shift) % size]
        incoming = np.empty(d - c)
        comm.Sendrecv(np.ascontiguousarray(data[a:b]), dest=right, recvbuf=incoming, source=left)
        data[c:d] += incoming
    if gather:
        for s in range(size - 1):
            a, b = bounds[(rank - s + gather_send_shift) % size]
            c, d = bounds[(rank - s) % size]
            incoming = np.empty(d - c)
            comm.Sendrecv(np.ascontiguousarray(data[a:b]), dest=right, recvbuf=incoming,
                          source=left)
            data[c:d] = incoming
    return data / size if divide else data


def off_by_one_chunk(comm, x):
    """Adds what arrives into the chunk it just sent, not the one that arrived."""
    return _ring(comm, x, reduce_recv_shift=0)


def gather_wrong_chunk(comm, x):
    """All-gather passes on the chunk one step behind."""
    return _ring(comm, x, gather_send_shift=0)


def forgets_to_divide(comm, x):
    return _ring(comm, x, divide=False)


def only_reduce_scatter(comm, x):
    return _ring(comm, x, gather=False)


def drops_the_remainder(comm, x):
    return _ring(comm, x, chunking="floor")


def changes_x(comm, x):
    return _ring(comm, x, copy=False)


def naive_whole_vector(comm, x):
    """Right answer, the whole vector passed round the ring N - 1 times."""
    rank, size = comm.Get_rank(), comm.Get_size()
    total, passing = x.copy(), x.copy()
    for _ in range(size - 1):
        incoming = np.empty_like(x)
        comm.Sendrecv(passing, dest=(rank + 1) % size, recvbuf=incoming,
                      source=(rank - 1) % size)
        total += incoming
        passing = incoming
    return total / size


def element_by_element(comm, x):
    """Right answer and ring bytes, but one message per element."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for s in range(size - 1):
            send = chunks[(rank - s + phase) % size]
            recv = chunks[(rank - s - 1 + phase) % size]
            requests = [comm.Isend(data[i:i + 1].copy(), dest=right) for i in send]
            for j in recv:
                incoming = np.empty(1)
                comm.Recv(incoming, source=left)
                data[j] = data[j] + incoming[0] if phase == 0 else incoming[0]
            for request in requests:
                request.Wait()
    return data / size


def uses_allreduce(comm, x):
    out = np.empty_like(x)
    comm.Allreduce(x, out)
    return out / comm.Get_size()


def wrong_buffer_size(comm, x):
    """Receives into a buffer one element too short when chunks differ in length."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        incoming = np.empty(len(x) // size)
        comm.Sendrecv(np.ascontiguousarray(data[send]), dest=(rank + 1) % size,
                      recvbuf=incoming, source=(rank - 1) % size)
        data[recv[:len(incoming)]] += incoming
    return data / size


def everyone_to_everyone(comm, x):
    """A direct reduce-scatter and all-gather: rank r sends chunk j to rank j. The same bytes
    and messages as a ring, not a ring."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    mine = chunks[rank]
    for k in range(1, size):
        to, frm = (rank + k) % size, (rank - k) % size
        incoming = np.empty(len(mine))
        comm.Sendrecv(np.ascontiguousarray(data[chunks[to]]), dest=to, recvbuf=incoming,
                      source=frm)
        data[mine] += incoming
    for k in range(1, size):
        to, frm = (rank + k) % size, (rank - k) % size
        incoming = np.empty(len(chunks[frm]))
        comm.Sendrecv(np.ascontiguousarray(data[mine]), dest=to, recvbuf=incoming, source=frm)
        data[chunks[frm]] = incoming
    return data / size


def pairs_by_xor(comm, x):
    """Recursive doubling with partner rank XOR k; the odd ranks out fold in first."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    k = 1
    while k < size:
        partner = rank ^ k
        if partner < size:
            incoming = np.empty_like(data)
            comm.Sendrecv(data, dest=partner, recvbuf=incoming, source=partner)
            data += incoming
        k *= 2
    return data / size


def pairs_xor_one_then_ring(comm, x):
    """Swaps halves with rank XOR 1 in the all-gather (neighbours on 4 ranks, both ways)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != 4:
        return ring_allreduce_mean(comm, x)
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        incoming = np.empty(len(recv))
        comm.Sendrecv(np.ascontiguousarray(data[send]), dest=(rank + 1) % size,
                      recvbuf=incoming, source=(rank - 1) % size)
        data[recv] += incoming
    for s in range(size - 1):
        partner = rank ^ 1
        recv = chunks[(rank - s) % size]
        incoming = np.empty_like(data)
        comm.Sendrecv(data, dest=partner, recvbuf=incoming, source=partner)
        data[recv] = incoming[recv]
    return data / size


def bidirectional_ring(comm, x, gather_to_the_left=True):
    """The reduce-scatter to the right, then the all-gather back to the left (or the other way
    round): right answer and bytes, every message to a neighbour, but both ways round."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    one, other = ((rank + 1) % size, (rank - 1) % size)[::1 if gather_to_the_left else -1]
    sign = 1 if gather_to_the_left else -1
    for s in range(size - 1):
        send, recv = chunks[(rank - sign * s) % size], chunks[(rank - sign * (s + 1)) % size]
        incoming = np.empty(len(recv))
        comm.Sendrecv(np.ascontiguousarray(data[send]), dest=one, recvbuf=incoming, source=other)
        data[recv] += incoming
    for s in range(size - 1):  # this rank's finished chunk is rank + sign; pass it back
        send, recv = chunks[(rank + sign * (1 + s)) % size], chunks[(rank + sign * (2 + s)) % size]
        incoming = np.empty(len(recv))
        comm.Sendrecv(np.ascontiguousarray(data[send]), dest=other, recvbuf=incoming, source=one)
        data[recv] = incoming
    return data / size


def bidirectional_ring_gathering_right(comm, x):
    return bidirectional_ring(comm, x, gather_to_the_left=False)


@pytest.mark.parametrize("function", [bidirectional_ring, bidirectional_ring_gathering_right])
@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_a_bidirectional_ring_is_named_as_such_on_three_ranks(function, seed):
    """On 3 ranks (the first trial) the two neighbours are all the others, but a phase each
    way round is the direction mistake, not an everyone-to-everyone exchange."""
    result = ch11.check_ring_allreduce(function, seed=seed, show=False)
    assert result.status == FAILED, result
    said = f"{result.message} {result.hint}"
    assert "both ways round" in said and "one way round" in said, said
    assert "everyone" not in said and "3 ranks" in said, said


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_everyone_to_everyone_is_still_named_on_three_ranks(seed):
    result = ch11.check_ring_allreduce(everyone_to_everyone, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "everyone-to-everyone" in result.message and "3 ranks" in result.message, result


def recursive_doubling(comm, x):  # pairs rank XOR 2^k exchanging whole vectors (round 16)
    rank, size = comm.Get_rank(), comm.Get_size()
    total = x.copy()
    k = 1
    while k < size:
        partner = rank ^ k
        if partner < size:
            incoming = np.empty_like(total)
            comm.Sendrecv(total.copy(), dest=partner, recvbuf=incoming, source=partner)
            total = total + incoming
        k *= 2
    return total / size


def gather_on_rank_zero(comm, x):
    """Rank 0 collects every vector, sums and sends the mean back."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        total = x.copy()
        for other in range(1, size):
            incoming = np.empty_like(x)
            comm.Recv(incoming, source=other)
            total += incoming
        for other in range(1, size):
            comm.Send(total, dest=other)
        return total / size
    comm.Send(x, dest=0)
    total = np.empty_like(x)
    comm.Recv(total, source=0)
    return total / size


def isend_waited_before_receiving(comm, x):
    """Isend then its Wait, then Recv, on every rank: a real deadlock (Wait needs a receiver)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        comm.Isend(data[send].copy(), dest=(rank + 1) % size).Wait()
        incoming = np.empty(len(recv))
        comm.Recv(incoming, source=(rank - 1) % size)
        data[recv] += incoming
    return data / size


def irecv_never_waited(comm, x):
    """Irecv posted but never waited for before using the buffer, Isend never completed either:
    the values are read before they could have arrived (here they have, so the mean is right)
    and the requests are dropped — the answer the check sees is a wrong one when the buffer is
    read early."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        incoming = np.zeros(len(recv))
        data[recv] += incoming  # read before the receive was even posted
        comm.Irecv(incoming, source=(rank - 1) % size)
        comm.Isend(data[send].copy(), dest=(rank + 1) % size)
    return data / size


def no_modulo(comm, x):
    """Neighbours without the modulo: rank N - 1 sends to rank N."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.copy()
    chunks = np.array_split(np.arange(len(x)), size)
    for s in range(size - 1):
        send, recv = chunks[(rank - s) % size], chunks[(rank - s - 1) % size]
        incoming = np.empty(len(recv))
        comm.Sendrecv(np.ascontiguousarray(data[send]), dest=rank + 1, recvbuf=incoming,
                      source=rank - 1)
        data[recv] += incoming
    return data / size


def returns_nothing(comm, x):
    _ring(comm, x)


def float32_result(comm, x):
    return _ring(comm, x).astype(np.float32)


def ring_in_float32(comm, x):  # a right ring on a float32 copy, cast back at the end
    rank, size = comm.Get_rank(), comm.Get_size()
    data = x.astype(np.float32)
    chunks = np.array_split(np.arange(data.size), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):
        send, receive = chunks[(rank - step) % size], chunks[(rank - step - 1) % size]
        incoming = np.empty(len(receive), np.float32)
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] += incoming
    for step in range(size - 1):
        send, receive = chunks[(rank - step + 1) % size], chunks[(rank - step) % size]
        incoming = np.empty(len(receive), np.float32)
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] = incoming
    return (data / size).astype(np.float64)


@pytest.mark.parametrize("function, words", [
    (blocking_send_then_recv, "Sendrecv"),
    (off_by_one_chunk, "index"),
    (gather_wrong_chunk, "chunk"),
    (forgets_to_divide, "divide by the number of ranks"),
    (only_reduce_scatter, "all-gather"),
    (drops_the_remainder, "remainder"),
    (changes_x, "copy"),
    (naive_whole_vector, "not a ring"),
    (element_by_element, "one message"),
    (uses_allreduce, "build the all-reduce yourself"),
    (wrong_buffer_size, "receive buffer"),
    (returns_nothing, "return the averaged vector"),
    (float32_result, "dtype"),
    (ring_in_float32, "float32's precision"),
    (everyone_to_everyone, "everyone-to-everyone"),
    (pairs_by_xor, "not round a ring"),
    (pairs_xor_one_then_ring, "one way round"),
    (gather_on_rank_zero, "routes that meet at one rank are what the ring avoids"),
    (recursive_doubling, "not round a ring"),
    (isend_waited_before_receiving, "Post the receive before you wait"),
    (irecv_never_waited, "wait for every request"),
    (no_modulo, "ring closes on itself"),
    (divided_by_n_minus_one, "the sum divided by 2, not by the number of ranks, 3"),
    (float32_receive_buffer, "a buffer of another dtype"),
    (reduce_scatter_overwrites, "what arrived replaced the partial sums"),
    (no_all_gather_other_chunks, "each rank holds only one finished chunk"),
    (all_gather_adds, "the all-gather ran, but added each chunk it received"),
])
def test_wrong_rings_fail_with_the_right_hint(function, words):
    start = time.perf_counter()
    result = ch11.check_ring_allreduce(function, seed=5, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, (result.message, result.hint)
    assert time.perf_counter() - start < 15, "a check must not hang"


def test_the_deadlock_is_reported_not_waited_out():
    start = time.perf_counter()
    result = ch11.check_ring_allreduce(blocking_send_then_recv, seed=3, show=False)
    assert "deadlock" in result.message and "waits in Send" in result.message
    assert time.perf_counter() - start < 3


def test_the_stub_is_not_attempted_and_try_ring_says_so(capsys):
    def stub(comm, x):
        raise NotImplementedError()

    assert ch11.check_ring_allreduce(stub, show=False).status == NOT_ATTEMPTED
    assert ch11.check_ring_allreduce(None, show=False).status == NOT_ATTEMPTED
    ch11.try_ring(stub)
    assert "not written yet" in capsys.readouterr().out


def test_try_ring_prints_every_rank(capsys):
    ch11.try_ring(ring_allreduce_mean, ranks=3, n=7)
    out = capsys.readouterr().out
    assert "rank 2:" in out and "sent" in out


# --- the α–β cost of a ring -------------------------------------------------------------------


def ring_time(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    return 2 * (n_ranks - 1) * (alpha_s + n_bytes / n_ranks / beta_bytes_per_s)


@pytest.mark.parametrize("function, status, words", [
    (ring_time, PASSED, "right"),
    (lambda S, N, a, b: (N - 1) * a + (N - 1) / N * S / b, FAILED, "factor 2"),
    (lambda S, N, a, b: 2 * (N - 1) * (a + S / b), FAILED, "not the whole buffer"),
    (lambda S, N, a, b: 2 * N * a + 2 * (N - 1) / N * S / b, FAILED, "N - 1 steps, not N"),
    (lambda S, N, a, b: a + 2 * (N - 1) / N * S / b, FAILED, "pays α"),
    (lambda S, N, a, b: 2 * (N - 1) / N * S / b, FAILED, "latency term is missing"),
    (lambda S, N, a, b: 2 * (N - 1) * a + 2 * S / b, FAILED, "2(N - 1)/N"),
    (lambda S, N, a, b: 2 * (N - 1) * a + 2 * (N - 1) / N * S * b, FAILED, "n / β"),
    (lambda S, N, a, b: str(ring_time(S, N, a, b)), FAILED, "float"),
    (lambda S, N, a, b: max(ring_time(S, N, a, b), a), FAILED, "return 0"),
    (lambda S, N, a, b: None, FAILED, "number of seconds"),
    (lambda S, N, a, b: 2 * (N - 1) * a + (N - 1) / N * S / b, FAILED, "messages each rank"),
    (lambda S, N, a, b: 2 * (N - 1) * (a + 8 * S / N / b), FAILED, "no factor of 8"),  # bits
    (lambda S, N, a, b: 1e3 * ring_time(S, N, a, b), FAILED, "in milliseconds"),
    (lambda S, N, a, b: 1e6 * ring_time(S, N, a, b), FAILED, "in microseconds"),
    (lambda S, N, a, b: 2 * (N - 1) * (a + S / N / (b / 1e9)), FAILED, "no conversion from GB"),
    (lambda S, N, a, b: (N - 1) * (a + S / b), FAILED, "to each of the others"),
    (lambda S, N, a, b: 2 * N * (a + S / N / b), FAILED, "2N steps instead of 2(N − 1)"),
])
def test_allreduce_time(function, status, words):
    result = ch11.check_allreduce_time(function, seed=11, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, (result.message, result.hint)


@pytest.mark.parametrize("seed", range(6))
def test_alpha_converted_from_microseconds_again_is_named(seed):
    """α × 1e-6 (alpha_s taken for µs): named as such where the α term still shows above the
    check's 1e-9; where it does not, the hint for a missing α term says it may be too small."""
    result = ch11.check_allreduce_time(
        lambda S, N, a, b: 2 * (N - 1) * a * 1e-6 + 2 * (N - 1) / N * S / b, seed=seed,
        show=False)
    assert result.status == FAILED
    assert "too small" in result.hint and "in seconds already" in result.hint, result.hint
    if seed in (1, 2, 3):
        assert "1e-6" in result.hint, result.hint


def ring_time_step_by_step(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    total = 0.0
    for _phase in ("reduce-scatter", "all-gather"):
        for _step in range(n_ranks - 1):
            total += alpha_s + (n_bytes / n_ranks) / beta_bytes_per_s
    return total


def ring_time_numpy(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    steps = np.int64(2) * (n_ranks - 1)
    return np.float64(steps * alpha_s + steps * n_bytes / (n_ranks * beta_bytes_per_s))


def ring_time_whole_byte_chunks(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    chunk = n_bytes // n_ranks  # a message carries whole bytes
    return 2 * (n_ranks - 1) * (alpha_s + chunk / beta_bytes_per_s)


def ring_time_chunks_rounded_up(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    chunk = math.ceil(n_bytes / n_ranks)
    return 2 * (n_ranks - 1) * (alpha_s + chunk / beta_bytes_per_s)


@pytest.mark.parametrize("function", [ring_time, ring_time_step_by_step, ring_time_numpy,
                                      ring_time_whole_byte_chunks, ring_time_chunks_rounded_up])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_right_formula_passes_every_seed(function, seed):
    assert ch11.check_allreduce_time(function, seed=seed, show=False).passed


def ring_from_collectives_at_run_time(comm, x):
    """A cheat: gpulab's own ring, from sys.modules by a name built at run time, on each rank."""
    import sys
    module = sys.modules[".".join(["gpulab", "parallel", "collectives"])]
    return getattr(module, "ring_allreduce" + "_mean")(comm, x)


def test_gpulab_s_ring_called_on_the_ranks_at_run_time_is_refused():
    """Each rank's call of the learner's ring is watched as a plain function's call is."""
    result = ch11.check_ring_allreduce(ring_from_collectives_at_run_time, seed=1, show=False)
    assert result.status == "failed", result.message
    assert "gpulab.parallel.collectives.ring_allreduce_mean" in result.message, result.message


def test_gpulab_own_formula_is_refused():
    from gpulab.parallel import links

    result = ch11.check_allreduce_time(links.ring_allreduce_time, show=False)
    assert not result.passed and "gpulab's own" in result.message


def test_the_time_stub_is_not_attempted():
    def stub(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
        raise NotImplementedError()

    assert ch11.check_allreduce_time(stub, show=False).status == NOT_ATTEMPTED


# --- the instructor notebook as nbgrader reads it ----------------------------------------------


def test_hidden_tests_sit_only_in_the_chapters_grade_cells():
    """nbgrader's generate_assignment refuses a '### BEGIN HIDDEN TESTS' outside a grade cell
    (it failed on chapter 11 when two experiment cells held their asserts that way); every
    grade cell of the chapter holds its hidden assert."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "solutions" / "11_many_gpus.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    graded, misplaced = [], []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        is_grade = cell["metadata"].get("nbgrader", {}).get("grade", False)
        if is_grade:
            graded.append(index)
            assert "### BEGIN HIDDEN TESTS" in source, f"grade cell {index} has no hidden test"
        elif "HIDDEN TESTS" in source:
            misplaced.append(index)
    assert not misplaced, f"hidden tests outside grade cells: cells {misplaced}"
    assert len(graded) == 3  # the ring all-reduce, its reduce step as a kernel, its time


# --- the reduce step as a kernel --------------------------------------------------------------

from numba import cuda  # noqa: E402 - gpulab (imported above) chose the tier first
from numba import float32 as numba_float32  # noqa: E402


@cuda.jit
def add_one_thread_each(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] += incoming[i]


@cuda.jit
def add_grid_stride(data, incoming, offset, length):
    start = cuda.grid(1)
    for i in range(start, length, cuda.gridsize(1)):
        data[offset + i] = data[offset + i] + incoming[i]


@cuda.jit
def add_early_return_atomic(data, incoming, offset, length):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= length:
        return
    cuda.atomic.add(data, offset + i, incoming[i])


@cuda.jit
def add_no_guard(data, incoming, offset, length):
    i = cuda.grid(1)
    data[offset + i] += incoming[i]


@cuda.jit
def add_guard_by_data(data, incoming, offset, length):
    i = cuda.grid(1)
    if offset + i < data.shape[0]:
        data[offset + i] += incoming[i]


@cuda.jit
def add_guard_by_position(data, incoming, offset, length):
    i = cuda.grid(1)
    if offset + i < length:
        data[offset + i] += incoming[i]


@cuda.jit
def add_ignores_offset(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[i] += incoming[i]


@cuda.jit
def add_overwrites(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] = incoming[i]


@cuda.jit
def add_into_incoming(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        incoming[i] += data[offset + i]


@cuda.jit
def add_subtracts(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] -= incoming[i]


@cuda.jit
def add_thread_index_only(data, incoming, offset, length):
    i = cuda.threadIdx.x
    if i < length:
        data[offset + i] += incoming[i]


@cuda.jit
def add_hard_coded_block(data, incoming, offset, length):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < length:
        data[offset + i] += incoming[i]


@cuda.jit
def add_stride_by_block(data, incoming, offset, length):
    start = cuda.grid(1)
    for i in range(start, length, cuda.blockDim.x):
        data[offset + i] += incoming[i]


@cuda.jit
def add_offset_on_both(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length - offset:
        data[offset + i] += incoming[offset + i]


@cuda.jit
def add_twice(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] += incoming[i]
        data[offset + i] += incoming[i]


@cuda.jit
def add_simulator_only(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] += incoming[i]
        print(f"thread {i}")


@cuda.jit
def add_guard_one_short(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length - 1:
        data[offset + i] += incoming[i]


@cuda.jit
def add_index_as_place_in_data(data, incoming, offset, length):
    i = cuda.grid(1)
    if i >= offset and i < offset + length:
        data[i] += incoming[i - offset]


@cuda.jit
def add_in_float32(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] = numba_float32(data[offset + i]) + numba_float32(incoming[i])


@cuda.jit
def add_multiplies(data, incoming, offset, length):
    i = cuda.grid(1)
    if i < length:
        data[offset + i] *= incoming[i]


@cuda.jit(device=True)
def _add_one(data, incoming, k, offset):
    data[offset + k] = data[offset + k] + incoming[k]


@cuda.jit
def add_with_a_device_function(data, incoming, offset, length):
    k = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if k < length:
        _add_one(data, incoming, k, offset)


@cuda.jit
def add_while_loop(data, incoming, offset, length):
    k = cuda.grid(1)
    while k < length:
        data[k + offset] += incoming[k]
        k += cuda.blockDim.x * cuda.gridDim.x


@cuda.jit
def add_forever(data, incoming, offset, length):
    i = cuda.grid(1)
    while i < length:
        data[offset + i] += incoming[i]


@pytest.mark.parametrize("kernel", [add_one_thread_each, add_grid_stride,
                                    add_early_return_atomic, add_with_a_device_function,
                                    add_while_loop])
@pytest.mark.parametrize("seed", [0, 1])
def test_right_reduce_steps_pass(kernel, seed):
    result = ch11.check_add_chunk(kernel, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("kernel, words", [
    (add_no_guard, "past the end"),
    (add_guard_by_data, "past the end"),
    (add_guard_by_position, "the last"),
    (add_ignores_offset, "not into the chunk at offset"),
    (add_overwrites, "replaced"),
    (add_into_incoming, "unchanged"),
    (add_subtracts, "minus"),
    (add_thread_index_only, "first"),
    (add_hard_coded_block, "hard-codes the block size"),
    (add_stride_by_block, "times, not once"),
    (add_offset_on_both, "wrong"),
    (add_twice, "twice"),
    (add_simulator_only, "GPU"),
    (add_forever, "finish"),
    (add_guard_one_short, "last 1 element(s) were not added"),
    (add_index_as_place_in_data, "element(s) were not added"),
    (add_in_float32, "rounded to float32"),
    (add_multiplies, "times incoming"),
])
def test_wrong_reduce_steps_fail_and_say_why(kernel, words):
    result = ch11.check_add_chunk(kernel, seed=4, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, (result.message, result.hint)


def test_gpulab_own_reduce_step_is_refused_and_the_stub_not_attempted():
    from gpulab.kernels import ring

    assert "gpulab's own" in ch11.check_add_chunk(ring.add_chunk, show=False).message

    @cuda.jit
    def stub(data, incoming, offset, length):
        raise NotImplementedError()

    assert ch11.check_add_chunk(stub, show=False).status == NOT_ATTEMPTED


def test_the_ring_runs_on_the_learners_kernel_once_it_passed(capsys):
    @cuda.jit
    def mine(data, incoming, offset, length):
        i = cuda.grid(1)
        if i < length:
            data[offset + i] += incoming[i]

    before = ch11.run_ring_on_kernel(mine, ranks=3, n=50)
    assert before["whose"] == "gpulab's add_chunk" and before["correct"]
    assert "has not passed" in capsys.readouterr().out
    assert ch11.check_add_chunk(mine, seed=0, show=False).passed
    after = ch11.run_ring_on_kernel(mine, ranks=3, n=50)
    assert after["whose"] == "your add_chunk" and after["correct"]
    assert after["launches"] == [2, 2, 2]


def test_try_add_chunk(capsys):
    ch11.try_add_chunk(add_one_thread_each)
    assert "NumPy's" in capsys.readouterr().out
    ch11.try_add_chunk(add_no_guard)
    out = capsys.readouterr().out
    assert "stopped" in out and len(out.splitlines()) <= 8


@cuda.jit
def add_chunk_by_thread_0(data, incoming, offset, length):
    """Wrong: thread 0 adds the whole chunk alone."""
    if cuda.grid(1) == 0:
        for k in range(length):
            data[offset + k] += incoming[k]


@cuda.jit
def add_chunk_rewriting_the_neighbour(data, incoming, offset, length):
    """Wrong: each thread writes its neighbour's element back as it read it (a race)."""
    i = cuda.grid(1)
    if i < length:
        data[offset + i] = data[offset + i] + incoming[i]
        if i + 1 < length:
            data[offset + i + 1] = data[offset + i + 1]


@pytest.mark.parametrize("kernel, words", [
    (add_chunk_by_thread_0, "written by one thread"),
    (add_chunk_rewriting_the_neighbour, "written by more than one thread"),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_add_chunk_method_mistakes(kernel, words, seed):
    result = ch11.check_add_chunk(kernel, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


def ring_refilling_one_send_buffer(comm, x):
    """Wrong: one send buffer refilled every step while the earlier Isends are still pending
    (waited for only at the end): MPI may read a send buffer until its request completes."""
    n, rank = comm.Get_size(), comm.Get_rank()
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = np.array_split(np.arange(x.size), n)
    data = x.astype(np.float64).copy()
    send = np.empty(max(c.size for c in chunks))
    requests = []
    for step in range(n - 1):
        out_chunk, in_chunk = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        send[:out_chunk.size] = data[out_chunk]
        requests.append(comm.Isend(send[:out_chunk.size], dest=right, tag=step))
        incoming = np.empty(in_chunk.size)
        comm.Recv(incoming, source=left, tag=step)
        data[in_chunk] += incoming
    for request in requests:
        request.Wait()
    return data / n


def test_a_send_buffer_reused_before_its_wait_is_told():
    result = ch11.check_ring_allreduce(ring_refilling_one_send_buffer, seed=1, show=False)
    assert result.status == "failed" and "changed before its Wait()" in result.message, (
        result.message)


def ring_reading_irecv_before_wait(comm, x):
    """Wrong: each step adds what an Irecv brings before waiting for it."""
    n, rank = comm.Get_size(), comm.Get_rank()
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = np.array_split(np.arange(x.size), n)
    data = x.astype(np.float64).copy()
    for step in range(n - 1):
        out_chunk, in_chunk = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        incoming = np.empty(in_chunk.size)
        request = comm.Irecv(incoming, source=left, tag=step)
        comm.Send(np.ascontiguousarray(data[out_chunk]), dest=right, tag=step)
        data[in_chunk] += incoming  # before the Wait
        request.Wait()
    for step in range(n - 1):
        out_chunk, in_chunk = chunks[(rank - step + 1) % n], chunks[(rank - step) % n]
        incoming = np.empty(in_chunk.size)
        request = comm.Irecv(incoming, source=left, tag=n + step)
        comm.Send(np.ascontiguousarray(data[out_chunk]), dest=right, tag=n + step)
        request.Wait()
        data[in_chunk] = incoming
    return data / n


def test_an_irecv_buffer_read_before_its_wait_is_told():
    result = ch11.check_ring_allreduce(ring_reading_irecv_before_wait, seed=1, show=False)
    assert result.status == "failed" and "read before its request completed" in (
        result.message), result.message


def time_from_links_by_a_built_name(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    """A cheat: gpulab's own formula, from sys.modules by a name built at run time."""
    import sys
    module = sys.modules[".".join(["gpulab", "parallel", "links"])]
    return getattr(module, "_".join(["ring", "allreduce", "time"]))(
        n_bytes, n_ranks, alpha_s, beta_bytes_per_s)


def time_from_the_checks_frame(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    """A cheat: the check's own expected value, read from its frame."""
    import sys
    frame = sys._getframe(1)
    while frame is not None and "TimeAnswer" not in frame.f_globals:
        frame = frame.f_back
    return frame.f_globals["TimeAnswer"](n_bytes, n_ranks, alpha_s, beta_bytes_per_s,
                                         0.0, 0).want


def test_the_time_formula_is_refused_however_it_is_reached():
    result = ch11.check_allreduce_time(time_from_links_by_a_built_name, seed=1, show=False)
    assert result.status == FAILED, result
    assert "gpulab.parallel.links.ring_allreduce_time" in result.message, result.message
    result = ch11.check_allreduce_time(time_from_the_checks_frame, seed=1, show=False)
    assert result.status == FAILED, result
    assert "reads the interpreter's frames" in result.message, result.message
    assert "(`_getframe`, `f_back`, `f_globals`)" in result.message, result.message


@cuda.jit
def add_chunk_summed_in_incoming(data, incoming, offset, length):
    """Wrong: right sums in data, but summed in the receive buffer first."""
    i = cuda.grid(1)
    if i < length:
        incoming[i] += data[offset + i]
        data[offset + i] = incoming[i]


def test_add_chunk_names_incoming_written():
    result = ch11.check_add_chunk(add_chunk_summed_in_incoming, seed=1, show=False)
    assert result.status == FAILED, result
    assert "your kernel changed incoming" in result.message, result.message
