"""User workloads for the ``module:factory`` tests: none of this is part of jetpredict.

``lstm_language_model`` brings its own dataset and loss (next-token prediction), as a language model
would; ``tiny_classifier`` is the classification form ``(model, input_shape, num_classes)``.
"""

from __future__ import annotations

import torch
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


def model_text() -> dict:
    return {"model": "resnet", "input_shape": (4,), "num_classes": 2}


def model_no_shape() -> dict:
    return {"model": nn.Linear(4, 2)}


def model_no_classes() -> dict:
    return {"model": nn.Linear(4, 2), "input_shape": (4,)}


def sized() -> dict:
    """A classifier on synthetic data of 100 samples."""
    return {"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2, "dataset_size": 100}


def told() -> dict:
    """:func:`sized` that says its epoch is 3 minibatches."""
    return {**sized(), "minibatches_per_epoch": 3}


def batches() -> dict:
    """Minibatches of 8 samples, given by the user, two per epoch."""
    return {"model": nn.Linear(4, 2), "loss": nn.CrossEntropyLoss(), "minibatches_per_epoch": 2,
            "batches": lambda: [(torch.zeros(8, 4), torch.zeros(8, dtype=torch.long))] * 2}
