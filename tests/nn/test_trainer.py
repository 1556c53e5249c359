"""The training loop: the digits recipe reaches 95 % held-out accuracy from its fixed seed, a
training step on the kernels equals the NumPy step, and bad data or a diverging run stop early
with an error that names the problem."""

import io

import numpy as np
import pytest

from gpulab.nn import MLP, Trainer, TrainingError, load_digits
from gpulab.nn.mlp import ShapeError
from gpulab.nn.recipes import DIGITS, digits_model, train_digits
from gpulab.nn.trainer import ProgressBar


@pytest.fixture(scope="module")
def digits():
    return load_digits(seed=0)


def test_the_digits_recipe_reaches_95_percent_held_out(digits):
    model, history = train_digits(data=digits)
    assert history.final.test_accuracy >= 0.95, history.table()
    assert model.accuracy(digits.X_test, digits.y_test) == pytest.approx(
        history.final.test_accuracy)
    losses = history.column("train_loss")
    assert losses[-1] < losses[0] / 5  # it learned; not a lucky constant
    assert len(history.records) == DIGITS["epochs"]


def test_the_same_seed_gives_the_same_run(digits):
    small = digits.subset(300, 100)
    runs = [train_digits(data=small, epochs=2)[1] for _ in range(2)]
    assert runs[0].column("train_loss") == runs[1].column("train_loss")
    other = train_digits(data=small, epochs=2, seed=1)[1]
    assert other.column("train_loss") != runs[0].column("train_loss")


def test_a_kernel_training_step_equals_the_numpy_step(digits):
    """One real step of the kernels (in the simulator, on a small batch) against NumPy."""
    X, y = digits.X_train[:8], digits.y_train[:8]
    numpy_model = MLP([64, 12, 10], seed=0)
    kernel_model = numpy_model.copy(backend="kernels")
    losses = []
    for model in (numpy_model, kernel_model):
        trainer = Trainer(model, "adam", lr=1e-2, progress=False)
        losses.append(trainer.step(X, y))
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)
    want = numpy_model.state()
    for name, value in kernel_model.state().items():
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=2e-6, err_msg=name)


def test_history_records_and_labels_its_times(digits):
    history = train_digits(data=digits.subset(200, 50), epochs=2)[1]
    record = history.final
    assert record.epoch == 2 and record.steps == -(-200 // DIGITS["batch_size"])
    assert record.seconds > 0 and record.samples_per_s == pytest.approx(200 / record.seconds)
    assert 0 <= record.test_accuracy <= 1 and record.test_loss > 0
    assert "measured on this CPU" in history.timing
    assert "measured on this CPU" in history.table()
    with pytest.raises(KeyError, match="columns are"):
        history.column("speed")


def test_fit_continues_where_it_stopped(digits):
    trainer = Trainer(digits_model(), batch_size=64, epochs=1, progress=False)
    trainer.fit(digits.subset(128, 32))
    history = trainer.fit(digits.subset(128, 32))
    assert history.column("epoch") == [1, 2]


def test_progress_bar_prints_per_epoch(digits, capsys):
    Trainer(digits_model(), batch_size=64, epochs=1).fit(digits.subset(128, 32))
    out = capsys.readouterr().out
    assert "epoch 1/1" in out and "held-out" in out and "samples/s" in out
    stream = io.StringIO()
    ProgressBar(3, 10, stream=stream, interval_s=0).update(1, 5, 0.5)
    assert "[############............] 5/10" in stream.getvalue()


def test_a_diverging_run_stops_and_names_the_step(digits):
    trainer = Trainer(digits_model(), "sgd", lr=1e30, momentum=0.0, progress=False)
    with pytest.raises(TrainingError, match=r"epoch 1, step \d+ of \d+.*loss became (nan|inf)"
                                            r".*learning rate"):
        trainer.fit(digits.subset(320, 32))


@pytest.mark.parametrize("change, words", [
    (lambda X, y: (X[:, :10], y), "train data: X_train has 10 features"),
    (lambda X, y: (X, y + 5), "out of range"),
    (lambda X, y: (X, y[:-1]), "labels"),
    (lambda X, y: (np.where(np.arange(X.shape[0])[:, None] == 3, np.nan, X), y),
     "NaN or infinite value in sample 3"),
])
def test_bad_training_data_is_named_before_any_step(digits, change, words):
    X, y = change(digits.X_train[:64], digits.y_train[:64])
    with pytest.raises(ShapeError, match=words):
        Trainer(digits_model(), progress=False).fit((X, y))


def test_bad_trainer_settings_are_named():
    with pytest.raises(ValueError, match="batch_size must be"):
        Trainer(digits_model(), batch_size=0)
    with pytest.raises(TypeError, match="gpulab.nn.MLP"):
        Trainer("model")
