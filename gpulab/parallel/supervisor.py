"""The first process of every MPI job: ``python supervisor.py LAUNCHER_PID FOLDER mpiexec ...``.

It starts ``mpiexec`` in its own process group (which :func:`gpulab.parallel.launch.run_mpi`
gave it) and waits for it, forwarding its exit status. Four times a second it checks that the
process that launched the job (the notebook's kernel) is still its parent; when it is not (the
kernel was killed, or restarted while busy), it ends the whole group — ``mpiexec``, ``prterun``
and every rank, SIGTERM then SIGKILL — and removes the job's folder. Run as a script, with the
standard library only, so that it starts in a few milliseconds (POSIX only).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

POLL_S = 0.25
GRACE_S = 2.0


def end_the_job(job: subprocess.Popen, folder: str) -> None:
    """SIGTERM the group (this process ignores it), give it GRACE_S, remove the folder, then
    SIGKILL the group, this process included."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    try:
        job.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    shutil.rmtree(folder, ignore_errors=True)
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: supervisor.py LAUNCHER_PID FOLDER COMMAND...", file=sys.stderr)
        return 2
    launcher_pid, folder, command = int(argv[0]), argv[1], argv[2:]
    if os.getppid() != launcher_pid:  # the launcher is already gone
        shutil.rmtree(folder, ignore_errors=True)
        return 1
    job = subprocess.Popen(command)  # same process group; stdin, stdout, stderr inherited
    while True:
        try:
            status = job.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if os.getppid() != launcher_pid:
                end_the_job(job, folder)
            continue
        return status if status >= 0 else 128 - status


if __name__ == "__main__":  # pragma: no cover - run by gpulab.parallel.launch
    sys.exit(main(sys.argv[1:]))
