"""What the kernel tests share, as fixtures (test modules do not import each other):
random inputs and a float comparison that allows a few roundings."""

import numpy as np
import pytest


def _tolerance(dtype, scale=1.0):
    """(rtol, atol): a few roundings, plus float32's tanh/exp being a few ulps off. The
    absolute part scales with the largest value: GELU's derivative is a difference of O(1)
    terms, so near 0 its error is a few ulps of 1, not of the (tiny) result."""
    if dtype == np.float32:
        return 1e-5, 1e-6 * max(scale, 1.0)
    return 1e-13, 1e-14 * max(scale, 1.0)


def _random(shape, dtype, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _assert_close(got, expected, dtype):
    rtol, atol = _tolerance(dtype, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


@pytest.fixture
def random_array():
    """``random_array(shape, dtype, seed, scale=3.0)``: normal values times scale."""
    return _random


@pytest.fixture
def assert_close():
    """``assert_close(got, expected, dtype)`` within a few roundings of ``dtype``."""
    return _assert_close
