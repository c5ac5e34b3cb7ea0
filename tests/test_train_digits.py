"""A real result: an MLP trained on scikit-learn's handwritten digits (shipped offline) reaches at
least 95% held-out accuracy in under 30 seconds, tagged either way."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn", reason="the digits example needs scikit-learn (pip install 'tapekit[test]')")

_spec = importlib.util.spec_from_file_location(
    "train_digits", Path(__file__).resolve().parents[1] / "examples" / "train_digits.py")
train_digits = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_digits)


@pytest.mark.parametrize("tagging", ["parameters", "input"])
def test_mlp_reaches_95_percent_on_held_out_digits_in_under_30_seconds(tagging):
    result = train_digits.train_digits(tagging=tagging)
    assert result.test_size == 450
    assert result.accuracy >= 0.95, str(result)
    assert result.seconds < 30, str(result)
    assert result.epoch_losses[-1] < result.epoch_losses[0] / 10


def test_both_taggings_train_the_same_model():
    by_params = train_digits.train_digits(epochs=2, tagging="parameters")
    by_input = train_digits.train_digits(epochs=2, tagging="input")
    assert by_params.epoch_losses == pytest.approx(by_input.epoch_losses, rel=1e-5)
    assert by_params.accuracy == by_input.accuracy
