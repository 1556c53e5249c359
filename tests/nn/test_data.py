"""The datasets: the bundled digits split with a seed, spirals, and mini-batches."""

import subprocess
import sys

import numpy as np
import pytest

from gpulab.nn import data
from gpulab.nn.data import bundled_digits, load_digits, minibatch_indices, spirals


def test_digits_split_is_stratified_and_seeded():
    a, b = load_digits(seed=0), load_digits(seed=0)
    assert a.n_train + a.n_test == 1797 and a.n_features == 64 and a.n_classes == 10
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert 0 <= a.X_train.min() and a.X_train.max() <= 1 and a.X_train.dtype == np.float32
    counts = np.bincount(a.y_test, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # 20 % of each digit's ~180 samples
    assert not np.array_equal(load_digits(seed=1).y_test, a.y_test)
    assert "scikit-learn" in str(a)


def test_the_digits_read_from_the_file_are_scikit_learns():
    from sklearn.datasets import load_digits as sklearn_digits

    pixels, labels = bundled_digits()
    bunch = sklearn_digits()
    np.testing.assert_array_equal(pixels, bunch.data)
    np.testing.assert_array_equal(labels, bunch.target)
    assert labels.dtype == np.int64 and not pixels.flags.writeable


def test_the_digits_load_without_importing_scikit_learn():
    code = ("import sys; from gpulab.nn.data import load_digits; load_digits(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stdout


def test_the_digits_come_from_scikit_learn_where_the_file_moved(monkeypatch):
    expected = bundled_digits()
    monkeypatch.setattr(data, "DIGITS_FILE", ("datasets", "data", "no-such-file.csv.gz"))
    bundled_digits.cache_clear()
    try:
        pixels, labels = bundled_digits()
    finally:
        bundled_digits.cache_clear()
    np.testing.assert_array_equal(pixels, expected[0])
    np.testing.assert_array_equal(labels, expected[1])


def test_spirals():
    data = spirals(n_per_class=40, n_classes=3, seed=0)
    assert data.n_features == 2 and data.n_train + data.n_test == 120
    assert set(np.unique(data.y_train)) == {0, 1, 2}
    with pytest.raises(ValueError, match="at least 2"):
        spirals(n_classes=1)


def test_minibatches_cover_every_sample_once():
    rng = np.random.default_rng(0)
    batches = minibatch_indices(103, 10, rng)
    assert [len(b) for b in batches] == [10] * 10 + [3]
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(103))
    assert not np.array_equal(np.concatenate(batches), np.arange(103))  # shuffled
    np.testing.assert_array_equal(np.concatenate(minibatch_indices(5, 2)), np.arange(5))
    with pytest.raises(ValueError, match="batch_size"):
        minibatch_indices(10, 0)
