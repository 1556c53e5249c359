"""Data to train on: real handwritten digits, and a synthetic set to draw pictures with.

- :func:`load_digits`: scikit-learn's bundled copy of the test part of the UCI "Optical
  Recognition of Handwritten Digits" set (Alpaydin and Kaynak, 1998;
  https://archive.ics.uci.edu/dataset/80): 1,797 images of 8 x 8 pixels (64 features, each
  0..16), digits 0-9, written by 13 people. It ships inside scikit-learn: no download. Split
  into training and held-out samples with a seed, stratified (every digit in the same
  proportion in both parts). The same 13 writers appear in both parts, so held-out accuracy
  measures new samples of familiar handwriting, not new writers. The file is read with NumPy
  where scikit-learn keeps it (:func:`bundled_digits`), without importing scikit-learn.
- :func:`spirals`: C interleaved spiral arms in the plane; no straight line separates them, so
  a model needs a hidden layer, and with 2 features its decision regions can be drawn.
- :func:`minibatch_indices`: a shuffled epoch cut into batches.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

# Where scikit-learn keeps the digits, below its package folder: the file its load_digits reads
# (a row a sample: 64 pixels, then the label; tested with scikit-learn 1.9.1).
DIGITS_FILE = ("datasets", "data", "digits.csv.gz")


@dataclass
class Dataset:
    """Training and held-out samples. Rows of X are samples; y holds class numbers 0..C-1."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    source: str

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]

    @property
    def n_train(self) -> int:
        return self.X_train.shape[0]

    @property
    def n_test(self) -> int:
        return self.X_test.shape[0]

    def subset(self, n_train: int, n_test: int | None = None) -> Dataset:
        """The first n_train training (and n_test held-out) samples: a smaller problem."""
        n_test = self.n_test if n_test is None else n_test
        return Dataset(f"{self.name} (subset)", self.X_train[:n_train], self.y_train[:n_train],
                       self.X_test[:n_test], self.y_test[:n_test], self.n_classes, self.source)

    def __str__(self) -> str:
        return (f"{self.name}: {self.n_train} training and {self.n_test} held-out samples, "
                f"{self.n_features} features, {self.n_classes} classes ({self.source})")


def _split(X, y, test_fraction: float, seed: int):
    """Stratified split: each class contributes the same fraction to the held-out part."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, not {test_fraction!r}")
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        rng.shuffle(members)
        test[members[: int(round(test_fraction * len(members)))]] = True
    train_idx, test_idx = np.flatnonzero(~test), np.flatnonzero(test)
    rng.shuffle(train_idx)
    rng.shuffle(test_idx)
    return X[train_idx], y[train_idx], X[test_idx], y[test_idx]


@cache
def bundled_digits() -> tuple[np.ndarray, np.ndarray]:
    """(pixels 0..16 as float64, 1,797 x 64; labels as int64), read-only: scikit-learn's
    bundled digits, read with ``np.loadtxt`` from the file (:data:`DIGITS_FILE`) that
    ``sklearn.datasets.load_digits`` reads, as it reads it, once per process. ``import
    sklearn.datasets`` costs 1.5-2 s of CPU (it loads SciPy's statistics), in every notebook
    kernel and MPI rank that trains on the digits; this costs 0.03 s. Where the file is not
    there (a scikit-learn that moved it), ``load_digits`` itself."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent.joinpath(*DIGITS_FILE) if spec and spec.origin else None
    if path is not None and path.is_file():
        table = np.loadtxt(path, delimiter=",")
        pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    else:
        from sklearn.datasets import load_digits as sklearn_digits

        bunch = sklearn_digits()
        pixels, labels = bunch.data, bunch.target.astype(np.int64)
    pixels.setflags(write=False)
    labels.setflags(write=False)
    return pixels, labels


def load_digits(test_fraction: float = 0.2, seed: int = 0, dtype=np.float32) -> Dataset:
    """scikit-learn's 8 x 8 handwritten digits (:func:`bundled_digits`), pixels scaled from
    0..16 to 0..1."""
    pixels, labels = bundled_digits()
    X = (pixels / 16.0).astype(dtype)
    y = labels.copy()
    X_train, y_train, X_test, y_test = _split(X, y, test_fraction, seed)
    return Dataset("digits", X_train, y_train, X_test, y_test, 10,
                   "scikit-learn's bundled copy of the UCI handwritten digits, 8 x 8 pixels")


def spirals(n_per_class: int = 200, n_classes: int = 3, noise: float = 0.15, turns: float = 1.0,
            test_fraction: float = 0.25, seed: int = 0, dtype=np.float32) -> Dataset:
    """``n_classes`` spiral arms of ``n_per_class`` points each, with Gaussian noise."""
    if n_per_class < 2 or n_classes < 2:
        raise ValueError("spirals needs at least 2 classes of at least 2 points")
    rng = np.random.default_rng(seed)
    X, y = [], []
    for label in range(n_classes):
        radius = np.linspace(0.05, 1.0, n_per_class)
        angle = (2 * np.pi * turns * radius + 2 * np.pi * label / n_classes
                 + rng.normal(0, noise, n_per_class))
        X.append(np.column_stack([radius * np.cos(angle), radius * np.sin(angle)]))
        y.append(np.full(n_per_class, label))
    X_all = np.concatenate(X).astype(dtype)
    y_all = np.concatenate(y).astype(np.int64)
    return Dataset("spirals", *_split(X_all, y_all, test_fraction, seed), n_classes,
                   f"synthetic: {n_classes} spiral arms, noise {noise:g}, seed {seed}")


def minibatch_indices(n_samples: int, batch_size: int,
                      rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """One epoch's batches: the sample indices, shuffled by ``rng`` (in order without one),
    cut into batches of ``batch_size``; the last batch holds the remainder, so every sample is
    used exactly once per epoch."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number, not {batch_size!r}")
    order = rng.permutation(n_samples) if rng is not None else np.arange(n_samples)
    return [order[start:start + batch_size] for start in range(0, n_samples, batch_size)]


__all__ = ["DIGITS_FILE", "Dataset", "bundled_digits", "load_digits", "minibatch_indices",
           "spirals"]
