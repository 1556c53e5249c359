"""The simulator child of :func:`gpulab.instruments.trace.trace_kernel` (run as ``python -m
gpulab.instruments --trace`` where the parent drives a GPU): a pickled request (a kernel's
recipe, the launch and its arguments) on stdin, the pickled
:class:`gpulab.instruments.trace.KernelTrace` on stdout."""

import pickle
import sys


def serve_trace() -> None:
    """Read one request from stdin, trace the rebuilt kernel, write the trace to stdout."""
    from numba import cuda

    # the modules under their own names, not __main__, so that the parent can unpickle the
    # KernelTrace
    from gpulab.instruments import recipes, trace

    recipe, blocks, threads, values = pickle.loads(sys.stdin.buffer.read())  # noqa: S301
    kernel = cuda.jit(recipes.rebuild_function(recipe))
    sys.stdout.buffer.write(pickle.dumps(trace.trace_kernel(kernel, blocks, threads, *values)))


if __name__ == "__main__" and "--trace" in sys.argv:
    serve_trace()
