"""User workloads for the ``module:factory`` tests: none of this is part of jetpredict.

``lstm_language_model`` brings its own dataset and loss (next-token prediction), as a language model
would; ``tiny_classifier`` is the classification form ``(model, input_shape, num_classes)``.
"""

from __future__ import annotations

from torch import nn

# The LSTM language model is the user-facing example; the tests profile that very file.
from examples.lstm_lm import LstmLanguageModel, TokenStream, lstm_language_model, next_token_loss

__all__ = ["LstmLanguageModel", "TokenStream", "lstm_language_model", "next_token_loss"]


def tiny_classifier() -> tuple[nn.Module, tuple[int, ...], int]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5))
    return model, (3, 8, 8), 5


def model_only() -> nn.Module:
    return nn.Linear(2, 2)


def dataset_without_loss() -> dict:
    return {"model": LstmLanguageModel(), "dataset": TokenStream()}


def wants_an_argument(width):
    """A factory that takes an argument: ``profile`` calls it with none."""
    raise AssertionError("never called")
