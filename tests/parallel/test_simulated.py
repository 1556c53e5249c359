"""Ranks as threads: mpi4py's point-to-point API, synchronous Send, deadlocks detected at once,
truncation and non-contiguous buffers refused, traffic counted."""

import time

import numpy as np
import pytest

from gpulab.parallel import simulated
from gpulab.parallel.simulated import (
    CollectiveNotAllowedError,
    CommError,
    DeadlockError,
    TruncationError,
    run_ranks,
)


def test_sendrecv_passes_round_a_ring_and_counts_bytes():
    def body(comm):
        out = np.empty(3)
        comm.Sendrecv(np.full(3, float(comm.rank)), dest=(comm.rank + 1) % comm.size,
                      recvbuf=out, source=(comm.rank - 1) % comm.size)
        return out

    result = run_ranks(4, body)
    assert result.ok
    assert [r[0] for r in result.returns] == [3.0, 0.0, 1.0, 2.0]
    assert result.bytes_sent == [24] * 4 and result.messages_sent == [1] * 4


def test_sendrecv_replace_sends_the_buffer_as_it_was_and_receives_into_it():
    def body(comm):
        buffer = np.full(3, float(comm.rank))
        comm.Sendrecv_replace(buffer, dest=(comm.rank + 1) % comm.size,
                              source=(comm.rank - 1) % comm.size)
        return buffer

    result = run_ranks(4, body)
    assert result.ok
    assert [r.tolist() for r in result.returns] == [[3.0] * 3, [0.0] * 3, [1.0] * 3, [2.0] * 3]
    assert result.bytes_sent == [24] * 4 and result.messages_sent == [1] * 4


def test_send_waits_for_its_receiver_so_send_first_everywhere_deadlocks_quickly():
    def body(comm):
        comm.Send(np.zeros(1), dest=(comm.rank + 1) % comm.size)
        comm.Recv(np.zeros(1), source=(comm.rank - 1) % comm.size)

    start = time.perf_counter()
    result = run_ranks(3, body, timeout_s=20)
    assert time.perf_counter() - start < 2
    rank, error = result.first_error()
    assert isinstance(error, DeadlockError)
    assert "rank 0 waits in Send to rank 1" in str(error)


def test_receiving_from_a_rank_that_returned_is_a_deadlock():
    def body(comm):
        if comm.rank == 1:
            comm.Recv(np.zeros(1), source=0)

    rank, error = run_ranks(2, body).first_error()
    assert isinstance(error, DeadlockError) and "already returned" in str(error)


def test_send_and_recv_in_alternating_order_works():
    def body(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = np.empty(1)
        if comm.rank % 2 == 0:
            comm.Send(np.array([comm.rank * 1.0]), dest=right)
            comm.Recv(got, source=left)
        else:
            comm.Recv(got, source=left)
            comm.Send(np.array([comm.rank * 1.0]), dest=right)
        return got[0]

    result = run_ranks(4, body)
    assert result.ok and result.returns == [3.0, 0.0, 1.0, 2.0]


def test_isend_irecv_and_objects():
    def body(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = np.empty(2)
        request = comm.Irecv(got, source=left)
        sent = comm.Isend(np.array([1.0, comm.rank]), dest=right)
        request.Wait()
        sent.Wait()
        word = comm.sendrecv(f"from {comm.rank}", dest=right, source=left)
        return got[1], word

    result = run_ranks(3, body)
    assert result.ok
    assert result.returns[0] == (2.0, "from 2")


def test_a_longer_message_than_the_buffer_is_refused():
    def body(comm):
        if comm.rank == 0:
            comm.Send(np.zeros(5), dest=1)
        else:
            comm.Recv(np.zeros(4), source=0)

    rank, error = run_ranks(2, body).first_error()
    assert isinstance(error, TruncationError) and "40 bytes" in str(error)


def test_strided_buffers_and_bad_ranks_are_refused():
    def strided(comm):
        comm.Sendrecv(np.zeros(6)[::2], dest=0, recvbuf=np.zeros(3), source=0)

    def outside(comm):
        comm.Send(np.zeros(1), dest=comm.size)

    assert "not contiguous" in str(run_ranks(1, strided).first_error()[1])
    assert "modulo" in str(run_ranks(2, outside).first_error()[1])


def test_collectives_only_where_allowed():
    def body(comm):
        out = np.empty(2)
        comm.Allreduce(np.array([1.0, comm.rank]), out)
        return out, comm.allgather(comm.rank), comm.bcast("hi" if comm.rank == 0 else None)

    result = run_ranks(3, body)
    assert result.ok
    assert list(result.returns[2][0]) == [3.0, 3.0]
    assert result.returns[1][1:] == ([0, 1, 2], "hi")
    rank, error = run_ranks(3, body, allow_collectives=False).first_error()
    assert isinstance(error, CollectiveNotAllowedError)
    with pytest.raises(CollectiveNotAllowedError):
        simulated.World(2, allow_collectives=False).comms[0].Reduce_scatter  # noqa: B018


def test_an_error_on_one_rank_stops_the_others():
    def body(comm):
        if comm.rank == 0:
            raise IndexError("boom")
        comm.Recv(np.zeros(1), source=0)

    result = run_ranks(3, body, timeout_s=5)
    rank, error = result.first_error()
    assert rank == 0 and isinstance(error, IndexError)
    assert all(isinstance(e, CommError) for e in result.errors[1:])


def test_a_rank_that_never_returns_is_reported():
    def body(comm):
        if comm.rank == 0:
            end = time.perf_counter() + 3
            while time.perf_counter() < end:  # stops by itself, after the check gave up
                pass

    result = run_ranks(2, body, timeout_s=0.5)
    assert "did not finish" in str(result.failure)


def test_requests_wait_as_mpi4py_s_class_methods_do():
    from gpulab.parallel import simulated

    def ring_step(comm, x):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = np.empty_like(x)
        requests = [comm.Irecv(got, source=left), None, comm.Isend(x, dest=right)]
        first = simulated.Request.Waitany(requests)
        assert first in (0, 2)
        assert simulated.Request.Waitsome(requests) in (None, [0], [2])
        simulated.Request.Waitall(requests)
        assert simulated.Request.Testall(requests)
        assert simulated.Request.Waitany(requests) == simulated.UNDEFINED  # none active
        return got

    results = simulated.run_ranks(3, ring_step, [(np.full(4, float(r)),) for r in range(3)],
                                  allow_collectives=False, timeout_s=10.0)
    assert results.ok, results.errors
    assert [float(v[0]) for v in results.returns] == [2.0, 0.0, 1.0]


def test_an_isend_buffer_written_before_its_wait_is_told():
    def ring(comm):
        buffer = np.zeros(4)
        received = np.zeros(4)
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        requests = []
        for step in range(2):
            buffer[:] = comm.rank + step  # refilled while the last Isend may still read it
            requests.append(comm.Isend(buffer, dest=right, tag=step))
            comm.Recv(received, source=left, tag=step)
        for request in requests:
            request.Wait()

    result = run_ranks(3, ring, timeout_s=5)
    rank, error = result.first_error()
    assert isinstance(error, CommError) and "changed before its Wait()" in str(error), error
