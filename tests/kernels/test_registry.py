"""The kernel registry: every kernel with its ptx signatures, and shared device functions,
which are always inlined and shown with the kernels that call them."""

import pytest

from gpulab.kernels import registry
from gpulab.kernels.registry import DEVICE_FUNCTIONS, kernel_spec, load_all


def test_float_signatures():
    assert registry.for_float_dtypes("void({t}[::1])") == ("void(float32[::1])",
                                                            "void(float64[::1])")


def test_every_module_is_loaded_and_every_kernel_has_signatures():
    specs = load_all()
    modules = {spec.module.rsplit(".", 1)[1] for spec in specs.values()}
    assert modules == {"accumulate", "amax", "dense", "dot", "elementwise", "evaluate",
                       "inference", "matmul", "memory", "narrow_formats", "optim", "ring",
                       "softmax"}
    assert all(spec.signatures and spec.summary for spec in specs.values())


def test_unknown_kernels_are_named_with_the_known_ones():
    with pytest.raises(KeyError, match="no kernel named 'dot_magic'.*dot_atomic"):
        kernel_spec("dot_magic")


def test_the_block_tree_is_one_device_function():
    """The shared-memory tree lives in dot.block_tree_sum; every dot kernel whose tree adds in
    its partial's own dtype calls it (dot_bf16_acc16 adds bf16 bit patterns: its own loop)."""
    load_all()
    callers = {name for name, spec in registry.REGISTRY.items()
               if "block_tree_sum" in spec.helpers}
    assert callers == {"dot_shared_tree", "dot_grid_stride", "dot_fp16_acc16",
                       "dot_fp16_acc32", "dot_bf16_acc32", "dot_fp8_acc32"}
    assert DEVICE_FUNCTIONS["block_tree_sum"].__module__ == "gpulab.kernels.dot"


def test_source_shows_the_kernel_then_its_device_functions():
    source = kernel_spec("dot_shared_tree").source
    kernel_at = source.index("def dot_shared_tree(")
    helper_at = source.index("def block_tree_sum(")
    assert kernel_at < helper_at
    assert "dot_shared_tree calls block_tree_sum, from gpulab.kernels.dot (inlined)" in source
    assert "cuda.syncthreads()" in source[helper_at:]
    assert "block_tree_sum" not in kernel_spec("dot_atomic").source


def test_names_must_be_unique_across_modules():
    load_all()

    def saxpy():
        pass

    saxpy.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match="two kernels are named 'saxpy'"):
        registry.kernel("void()")(saxpy)

    def block_tree_sum():
        pass

    block_tree_sum.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match="two device functions are named 'block_tree_sum'"):
        registry.device_function(block_tree_sum)


def test_a_shown_kernel_explains_gpulabs_decorator_first():
    source = kernel_spec("elementwise_multiply").source
    said, kernel = source.split("\n@kernel(", 1)
    assert "gpulab's @cuda.jit" in said and "ptx tier" in said and said.startswith("#")
    assert kernel.startswith("*for_float_dtypes(")
