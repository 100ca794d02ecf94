"""Model complexity: forward MACs and parameters (ptflops), training FLOPs, bytes, modules and kernels.

ptflops counts the forward pass only and leaves the model in eval mode, so it runs on a deep copy.
Units: ``macs_fwd`` multiply-accumulates per sample; ``flops_train`` FLOPs per sample for one training
step, taken as 3 x 2 x ``macs_fwd`` (backward ~ 2 x forward, 2 FLOPs per MAC); ``param_bytes`` bytes of
the parameters; ``activation_bytes`` bytes of all leaf-module outputs of one forward pass *per sample*
(what autograd keeps for backward, roughly); ``leaf_modules`` leaf modules in the model;
``kernel_count`` an estimate of kernels launched per minibatch: one per leaf-module call forward, two
backward for a call with parameters (input and weight gradients) else one, plus one optimizer update per
parameter tensor. Anything that cannot be traced is ``None`` with ``null_reason`` saying why.
"""

from __future__ import annotations

import contextlib
import copy
import io
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

#: FLOPs of one training step per forward MAC: 2 FLOPs per MAC x (1 forward + 2 backward).
TRAIN_FLOPS_PER_MAC = 6


@dataclass(frozen=True)
class Complexity:
    """Per-sample compute and size of a model (see the module docstring for units); the profile-row
    complexity columns of real and simulated runs alike. Imports without torch (the twin uses it)."""

    macs_fwd: int | None
    params: int
    flops_train: int | None
    param_bytes: int
    activation_bytes: int | None
    leaf_modules: int | None
    kernel_count: int | None
    null_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _leaf_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if not list(m.children())]


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, tuple | list):
        return sum(_tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    return 0


def _call(model: nn.Module, example: Any) -> Any:
    return model(**example) if isinstance(example, dict) else model(example)


def _trace_calls(model: nn.Module, example: Any) -> tuple[int, int]:
    """(activation bytes, kernels fwd+bwd) from one forward pass with hooks on every leaf module."""
    import torch

    state = {"bytes": 0, "kernels": 0}

    def hook(module: nn.Module, _inputs: Any, output: Any) -> None:
        state["bytes"] += _tensor_bytes(output)
        has_params = any(True for _ in module.parameters(recurse=False))
        state["kernels"] += 1 + (2 if has_params else 1)

    handles = [m.register_forward_hook(hook) for m in _leaf_modules(model)]
    try:
        with torch.no_grad():
            _call(model, example)
    finally:
        for h in handles:
            h.remove()
    return state["bytes"], state["kernels"]


def _move(example: Any, device: torch.device) -> Any:
    import torch

    if isinstance(example, torch.Tensor):
        return example.to(device)
    if isinstance(example, dict):
        return {k: _move(v, device) for k, v in example.items()}
    if isinstance(example, tuple | list):
        return type(example)(_move(v, device) for v in example)
    return example


def measure_complexity(model: nn.Module, example_input: Any) -> Complexity:
    """Complexity of ``model`` for one sample; ``example_input`` has a batch dimension of 1.

    The model itself is not touched (a copy is counted); failures to trace give ``None`` + reason.
    """
    import torch

    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    leaves = len(_leaf_modules(model))
    n_param_tensors = sum(1 for p in model.parameters() if p.requires_grad)
    try:
        clone = copy.deepcopy(model).cpu()
    except Exception as exc:  # deepcopy of user models can fail (open handles, hooks)
        reason = f"cannot copy the model to count it: {type(exc).__name__}: {exc}"
        return Complexity(None, params, None, param_bytes, None, leaves, None, reason)
    example = _move(example_input, torch.device("cpu"))
    reasons: list[str] = []

    macs: int | None = None
    try:
        from ptflops import get_model_complexity_info
    except ImportError:
        reasons.append("ptflops is not installed (pip install 'jetpredict[profiler]')")
    except Exception as exc:  # noqa: BLE001 - it imports torchvision.ops, which a mismatched torchvision breaks
        reasons.append(f"ptflops does not import here ({type(exc).__name__}: {exc})"[:300])
    else:
        captured = io.StringIO()
        shape = tuple(example.shape[1:]) if isinstance(example, torch.Tensor) else (1,)
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            try:
                macs_raw, _ = get_model_complexity_info(
                    clone, shape, as_strings=False, print_per_layer_stat=False, backend="pytorch",
                    input_constructor=lambda _res: example)
            except Exception as exc:  # ptflops raises for some input constructors
                macs_raw = None
                captured.write(f"{type(exc).__name__}: {exc}")
        if macs_raw is None:
            lines = [ln for ln in captured.getvalue().splitlines() if ln.strip()]
            detail = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")
            reasons.append(f"ptflops could not trace the model: {detail.strip()}"[:300])
        else:
            macs = int(macs_raw)

    activation_bytes: int | None = None
    kernels: int | None = None
    try:
        clone.train()
        activation_bytes, fwd_bwd = _trace_calls(clone, example)
        kernels = fwd_bwd + n_param_tensors
    except Exception as exc:  # a model that fails a plain forward here cannot be traced
        reasons.append(f"forward pass for activation bytes failed: {type(exc).__name__}: {exc}"[:300])
    flops = None if macs is None else TRAIN_FLOPS_PER_MAC * macs
    return Complexity(macs, params, flops, param_bytes, activation_bytes, leaves, kernels,
                      "; ".join(reasons) or None)
