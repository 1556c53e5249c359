"""The ptx tier: every kernel compiles for real GPU architectures, without a GPU.

The simulator accepts Python that no GPU can run; compile_ptx does not. This is the test that
keeps one kernel source valid for both.
"""

import inspect
import os
import subprocess
import sys

import pytest

from gpulab import ptx
from gpulab.kernels.registry import DEVICE_FUNCTIONS, REGISTRY, load_all

pytestmark = pytest.mark.ptx


@pytest.fixture(scope="module")
def compiled():
    return ptx.compile_all()


def test_every_kernel_compiles_for_every_architecture(compiled):
    failures = [f"{r.kernel} {r.signature} sm_{r.compute_capability}: {r.error}"
                for r in compiled if not r.ok]
    assert not failures, "\n".join(failures)
    covered = {(r.kernel, r.compute_capability) for r in compiled}
    for name in load_all():
        for cc in ptx.ARCHITECTURES:
            assert (name, cc) in covered


def test_ptx_targets_the_architecture(compiled):
    for r in compiled:
        major, minor = r.compute_capability
        assert f".target sm_{major}{minor}" in r.ptx


def test_tree_kernels_use_barriers_and_shared_memory(compiled):
    tree = next(r for r in compiled if r.kernel == "dot_shared_tree")
    assert "bar.sync" in tree.ptx and ".shared" in tree.ptx


def test_device_functions_are_inlined(compiled):
    """Kernels that call a shared device function (registry.device_function) compile with no
    GPU because it is inlined: their float32/float64 PTX calls nothing."""
    load_all()
    callers = {name for name, spec in REGISTRY.items() if spec.helpers}
    assert {"dot_shared_tree", "bias_activation"} <= callers
    checked = [r for r in compiled if r.kernel in callers and "float16" not in r.signature
               and "uint" not in r.signature]
    assert checked
    for r in checked:
        assert "call" not in r.ptx, f"{r.kernel} {r.signature} calls a function"


def test_kernels_without_float64_arguments_do_no_float64_arithmetic(compiled):
    """A float literal or an integer meeting a float32 is float64 in Numba (``hits += 1`` on a
    float32 count, ``top / 16``): arithmetic at 1/32 to 1/64 of float32's rate on most GPUs,
    which the simulator never shows. gpulab's float32 kernels do none; what compiles to float32
    anyway (``x * 2.0``) is not counted: the PTX is read, not the source."""
    found = [f"{r.kernel} {r.signature} sm_{r.compute_capability[0]}{r.compute_capability[1]}: "
             f"{sorted(set().union(*ptx.float64_arithmetic(r.ptx).values()))}"
             for r in compiled if "float64" not in r.signature and ptx.float64_arithmetic(r.ptx)]
    assert not found, "\n".join(found)
    float64 = next(r for r in compiled if r.kernel == "saxpy" and "float64" in r.signature)
    assert {"fma.rn.f64"} <= set().union(*ptx.float64_arithmetic(float64.ptx).values())


def _module_kernels():
    """Every CUDA kernel object defined in gpulab.kernels, found without trusting the registry."""
    import importlib
    import pkgutil

    import gpulab.kernels as package

    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"gpulab.kernels.{info.name}")
        for name, value in vars(module).items():
            kind = type(value).__name__
            if kind in ("CUDADispatcher", "FakeCUDAKernel") and (
                getattr(value, "py_func", None) or getattr(value, "fn", None)
            ).__module__ == module.__name__ and name not in DEVICE_FUNCTIONS:
                found.add(name)
    return found


def test_every_kernel_is_registered():
    load_all()
    assert _module_kernels() <= set(REGISTRY), "define kernels with registry.kernel(...)"
    assert _module_kernels(), "found no kernel objects: the scan is broken"


def test_simulator_only_code_is_rejected():
    """A kernel that builds a Python list runs in the simulator but must fail here."""
    code = inspect.cleandoc(
        """
        import gpulab
        from numba import cuda
        def bad(out):
            values = [1.0, 2.0]
            out[0] = values[0]
        try:
            cuda.compile_ptx(bad, "void(float32[::1])", cc=(8, 0))
        except Exception as error:
            print("rejected:", type(error).__name__)
        """
    )
    env = dict(os.environ, GPULAB_DEVICE="ptx", NUMBA_ENABLE_CUDASIM="0")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=False)
    assert "rejected:" in result.stdout, result.stdout + result.stderr


def test_cli_shows_one_kernel():
    from gpulab.cli import main

    assert main(["ptx", "dot_atomic", "--cc", "7.5", "--dtype", "float64"]) == 0


def test_float16_arithmetic_is_found_at_the_kernel_s_line_as_a_call_of_half_operators():
    """Numba compiles a float16 product as a call of cuda_fp16's ``operator*`` on ``__half``,
    inlined from its own file: the line is the kernel's, from the ``.loc``'s ``inlined_at``."""
    text = "\n".join([
        '.file 1 "<kernel k>"', '.file 2 "/numba_cuda/numba/cuda/_internal/cuda_fp16.py"',
        ".loc 1 4 1", "cvt.f32.f16 %f1, %rs1;",
        ".loc 2 6165 1, function_name $L__info_string0, inlined_at 1 5 1",
        "call.uni (retval0),", "_ZmlRK6__halfS1__nbst,", "(", "param0", ");",
        ".loc 1 6 1", "@%p1 fma.rn.f16 %rs3, %rs1, %rs2, %rs3;", "add.f32 %f2, %f1, %f1;",
        ".loc 2 6089 1, function_name $L__info_string1, inlined_at 1 7 1",
        "call.uni (retval0), _ZplRK6__halfS1__nbst, (param0, param1);",
        ".loc 1 8 1", "call.uni (retval0),", "_Z10some_helperPf,", "(", "param0", ");"])
    assert ptx.float16_arithmetic(text) == {("<kernel k>", 5): {"__half *"},
                                            ("<kernel k>", 6): {"fma.rn.f16"},
                                            ("<kernel k>", 7): {"__half +"}}
