"""Training workloads: model + data + loss + optimizer + batch size + DataLoader workers.

A workload name is one of

- a built-in id (:data:`profiler.builtin_workloads.BUILTIN_WORKLOADS`, networks from :mod:`profiler.nets`);
- ``torchvision:NAME`` (a ``torchvision.models`` network, 3x224x224, 1000 classes) when torchvision imports;
- ``module.path:factory`` for any user model. ``factory()`` returns either
  ``(model, input_shape, num_classes)`` for classification, or a mapping / :class:`WorkloadParts` with
  ``model`` and then ``input_shape`` + ``num_classes`` (classification on synthetic or ``--data`` images),
  or ``dataset`` (a torch ``Dataset`` of ``(input, target)`` samples) + ``loss`` (``loss(output, target)``),
  or ``batches`` (a zero-argument callable returning an iterable of ready ``(input, target)`` minibatches)
  + ``loss``. Optional keys: ``dataset_size`` (samples per epoch), ``minibatches_per_epoch``,
  ``optimizer`` (``optimizer(params) -> torch.optim.Optimizer``; default SGD lr 0.01 momentum 0.9).
  Classification on synthetic data without ``dataset_size`` assumes
  :data:`~profiler.builtin_workloads.DEFAULT_SYNTHETIC_SAMPLES` samples per epoch (CIFAR-10's).

Data is a real image folder (``--data DIR`` in ImageFolder layout, decoded with Pillow and augmented on
the CPU in the DataLoader workers, as in a real pipeline) or synthetic uint8 images of the right shape that
go through the same augmentation. The dataset size sets the minibatches per epoch (ceil(size / batch)).
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import re
import site
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jetpredict.models.errors import InputError, UnknownWorkloadError, cli_flag
from jetpredict.models.profiling_protocol import BATCH_SIZE
from jetpredict.profiler import nets
from jetpredict.profiler.builtin_workloads import (
    BUILTIN_WORKLOADS,
    DEFAULT_SYNTHETIC_SAMPLES,
    unknown_workload,
)
from jetpredict.profiler.loader import check_batch_fits, loader_settings
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

#: ImageNet-1k training images: the epoch size assumed for ``torchvision:NAME`` without ``--data``.
IMAGENET_TRAIN_IMAGES = 1_281_167
#: ``--data`` image extensions -> the Pillow format that decodes them. Pillow picks a decoder by content, not
#: by name: only these formats are tried, so a file of another kind (EPS, which it hands to Ghostscript) is
#: refused rather than decoded by a plugin we never meant to run.
IMAGE_FORMATS: dict[str, str] = {".png": "PNG", ".ppm": "PPM", ".pgm": "PPM", ".pnm": "PPM", ".jpg": "JPEG",
                                 ".jpeg": "JPEG", ".bmp": "BMP", ".webp": "WEBP"}
IMAGE_EXTENSIONS = tuple(IMAGE_FORMATS)
#: The Pillow formats ``--data`` images may be decoded as, sorted (they also name them in the refusal).
_PILLOW_FORMATS = tuple(sorted(set(IMAGE_FORMATS.values())))


@dataclass(frozen=True)
class WorkloadSpec:
    """What a workload is, before anything is built: name, input, classes and epoch size in samples."""

    name: str
    model_factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...] | None
    num_classes: int | None
    dataset_size: int | None
    dataset: str = "synthetic"
    #: For user workloads: the factory's extra parts (dataset / batches / loss / optimizer).
    parts: WorkloadParts | None = None

    def minibatches_per_epoch(self, batch_size: int) -> int:
        """ceil(dataset_size / batch_size): MNIST 60000/16 = 3750, CIFAR-10 3125, GLD-23k 1443."""
        if self.parts is not None and self.parts.minibatches_per_epoch:
            return int(self.parts.minibatches_per_epoch)
        if not self.dataset_size:
            raise InputError(f"workload {self.name!r} has no dataset size; return dataset_size or "
                             "minibatches_per_epoch from the factory", "workload")
        return math.ceil(self.dataset_size / batch_size)


@dataclass
class WorkloadParts:
    """What a ``module:factory`` returns (a mapping with the same keys works too)."""

    model: nn.Module
    input_shape: tuple[int, ...] | None = None
    num_classes: int | None = None
    dataset: Dataset | None = None
    batches: Callable[[], Iterable[Any]] | None = None
    loss: Callable[[Any, Any], torch.Tensor] | None = None
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] | None = None
    dataset_size: int | None = None
    minibatches_per_epoch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: A factory's count keys, each an integer >= 1 when given (``input_shape`` holds such integers too).
_COUNT_KEYS = ("num_classes", "dataset_size", "minibatches_per_epoch")
_COUNT_RULE = "must be an integer >= 1"
_SHAPE_RULE = "must be a non-empty sequence of integers >= 1 (one sample's shape, e.g. (3, 32, 32))"


def _count(value: object) -> int | None:
    """``value`` as an int when it is an integer >= 1 (a bool is none), else None."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        return None
    return int(value)


def _check_values(parts: WorkloadParts, where: str) -> None:
    """Refuse the factory's shape and counts before anything is built from them (they otherwise fail inside torch,
    or train a mode before the row check refuses it); int() them in place."""
    def refuse(key: str, value: object, rule: str) -> InputError:
        return InputError(f"{where} returned {key}={value!r}: {key} {rule}", "workload")

    if parts.input_shape is not None:
        shape = parts.input_shape
        dims = [] if isinstance(shape, str | bytes) or not isinstance(shape, Iterable) else list(shape)
        counts = [_count(d) for d in dims]
        if not counts or None in counts:
            raise refuse("input_shape", shape, _SHAPE_RULE)
        parts.input_shape = tuple(counts)
    for key in _COUNT_KEYS:
        value = getattr(parts, key)
        if value is not None:
            if (count := _count(value)) is None:
                raise refuse(key, value, _COUNT_RULE)
            setattr(parts, key, count)


def _returned(result: object) -> str:
    """What a factory returned that is neither form, in words: ``a 2-item tuple, not 3 items, whose item 0 is a
    str, not a torch.nn.Module``, ``a 3-item list: return a tuple``, ``a str``."""
    if not isinstance(result, tuple | list):
        return f"a {type(result).__name__}"
    said = f"a {len(result)}-item {type(result).__name__}"
    if isinstance(result, list):
        return f"{said}: return a tuple"
    if len(result) != 3:
        said += ", not 3 items,"
    if result and not isinstance(result[0], nn.Module):
        said += f" whose item 0 is a {type(result[0]).__name__}, not a torch.nn.Module"
    return said.rstrip(",")


def _parts_from_factory(result: object, where: str) -> WorkloadParts:
    """The factory's ``result`` as :class:`WorkloadParts`; InputError (field ``workload``) naming what is
    missing or which key breaks which rule. ``where``: ``--workload 'NAME': its factory F()``."""
    if isinstance(result, WorkloadParts):
        parts = result
    elif isinstance(result, tuple) and len(result) == 3 and isinstance(result[0], nn.Module):
        parts = WorkloadParts(model=result[0], input_shape=result[1], num_classes=result[2])
    elif isinstance(result, Mapping):
        known = {f for f in WorkloadParts.__dataclass_fields__ if f != "extra"}
        parts = WorkloadParts(**{k: v for k, v in result.items() if k in known},
                              extra={k: v for k, v in result.items() if k not in known})
    elif isinstance(result, nn.Module):
        raise InputError(f"{where} returned only a model: also return the input shape and class count "
                         "(model, input_shape, num_classes) or a dataset and loss", "workload")
    else:
        raise InputError(f"{where} must return (model, input_shape, num_classes) or a mapping with "
                         f"'model'; got {_returned(result)}", "workload")
    if not isinstance(parts.model, nn.Module):
        raise InputError(f"{where}: 'model' must be a torch.nn.Module", "workload")
    has_data = parts.dataset is not None or parts.batches is not None
    if not has_data and (parts.input_shape is None or parts.num_classes is None):
        raise InputError(f"{where}: give input_shape and num_classes (classification), or a dataset or "
                         "batches with a loss", "workload")
    if has_data and parts.loss is None:
        raise InputError(f"{where}: a factory that brings its own dataset or batches must also return "
                         "'loss' (loss(output, target) -> scalar tensor)", "workload")
    _check_values(parts, where)
    return parts


#: ``MODULE:FACTORY``: a dotted module path (no relative import) and a name in it.
_USER_WORKLOAD = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def where_raised(exc: BaseException) -> str | None:
    """``FILE:LINE`` in the user's own code where ``exc`` was raised: a syntax error's own place, else the
    innermost frame of its traceback outside jetpredict, the standard library and installed packages (torch);
    None when there is none (a failure inside a library called from code that is not the user's)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    ours = {os.path.realpath(f) for name, m in list(sys.modules.items())
            if name.partition(".")[0] == "jetpredict" and (f := getattr(m, "__file__", None))}
    paths = sysconfig.get_paths()
    installed = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    libraries = tuple({os.path.join(os.path.realpath(d), "") for d in (*installed, site.getusersitepackages())})
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        real = os.path.realpath(frame.filename)
        if not frame.filename.startswith("<") and real not in ours and not real.startswith(libraries):
            return f"{frame.filename}:{frame.lineno}"
    return None


def user_code_failed(name: str, step: str, exc: Exception) -> str:
    """``--workload NAME: STEP failed at FILE:LINE: Error: message`` for an exception of the user's code."""
    where = where_raised(exc)
    detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)  # its str() repeats the file and line
    return (f"{cli_flag('workload')} {name!r}: {step} failed{f' at {where}' if where else ''}: "
            f"{type(exc).__name__}: {detail}")


def _passed_over(module_name: str) -> str:
    """Where the working directory holds a file of ``module_name``'s top-level name that is not the one
    loaded (a module of that name comes earlier on sys.path, the working directory being last): a sentence
    asking for a rename; else ``""``."""
    top = module_name.partition(".")[0]
    loaded = getattr(sys.modules.get(top), "__file__", None)
    for mine in (Path.cwd() / f"{top}.py", Path.cwd() / top / "__init__.py"):
        if mine.is_file() and (loaded is None or not mine.samefile(loaded)):
            return (f"; {mine} is not the file loaded: a module named {top!r} comes first on Python's path, so "
                    f"rename your file (e.g. to my_{top}.py) and the module in --workload")
    return ""


def _user_workload(name: str) -> WorkloadSpec:
    if not _USER_WORKLOAD.fullmatch(name):
        raise UnknownWorkloadError(f"{cli_flag('workload')} {name!r} must be MODULE:FACTORY, a dotted module "
                                   "path importable from here and a function in it (e.g. my_models:make)",
                                   "workload")
    module_name, _, attr = name.partition(":")
    # Console scripts do not put the working directory on sys.path; users expect `mymodels:make` to work.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownWorkloadError(f"{cli_flag('workload')} {name!r}: cannot import module {module_name!r} ({exc})",
                                   "workload") from exc
    except Exception as exc:  # the user's file itself: a syntax error, or whatever it raises at import
        raise UnknownWorkloadError(user_code_failed(name, f"importing module {module_name!r}", exc),
                                   "workload") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UnknownWorkloadError(f"{cli_flag('workload')} {name!r}: module {module_name!r} (loaded from "
                                   f"{getattr(module, '__file__', None) or 'no file'}) has no callable {attr!r}"
                                   f"{_passed_over(module_name)}", "workload")
    try:
        inspect.signature(factory).bind()
    except TypeError:
        raise InputError(f"{cli_flag('workload')} {name!r}: its factory {attr}() must take no arguments",
                         "workload") from None
    except ValueError:  # no signature to read (a builtin): call it and see
        pass
    try:
        made = factory()
    except Exception as exc:
        raise InputError(user_code_failed(name, f"its factory {attr}()", exc), "workload") from exc
    parts = _parts_from_factory(made, f"{cli_flag('workload')} {name!r}: its factory {attr}()")
    size = parts.dataset_size
    if size is None and parts.dataset is not None and hasattr(parts.dataset, "__len__"):
        size = len(parts.dataset)  # type: ignore[arg-type]
    if size is None and parts.dataset is None and parts.batches is None:
        size = DEFAULT_SYNTHETIC_SAMPLES
    return WorkloadSpec(name=name, model_factory=lambda: parts.model, input_shape=parts.input_shape,
                        num_classes=parts.num_classes, dataset_size=size,
                        dataset="user" if parts.dataset is not None or parts.batches is not None
                        else "synthetic", parts=parts)


def _torchvision_workload(name: str) -> WorkloadSpec:
    arch = name.split(":", 1)[1]
    try:
        import torchvision  # noqa: F401  (optional: the profiler does not depend on it)
        from torchvision import models as tv_models
    except Exception as exc:  # noqa: BLE001 - a torchvision built for another torch raises RuntimeError or OSError
        raise UnknownWorkloadError(f"workload {name!r} needs torchvision, which does not import here "
                                   f"({type(exc).__name__}: {exc}); use a built-in workload "
                                   f"({', '.join(BUILTIN_WORKLOADS)}) or module:factory", "workload") from None
    if arch not in tv_models.list_models():
        raise UnknownWorkloadError(f"torchvision has no model {arch!r}", "workload")
    return WorkloadSpec(name=name, model_factory=lambda: tv_models.get_model(arch, weights=None),
                        input_shape=(3, 224, 224), num_classes=1000, dataset_size=IMAGENET_TRAIN_IMAGES,
                        dataset="ImageNet-1k")


def resolve_workload(name: str) -> WorkloadSpec:
    """The :class:`WorkloadSpec` for a built-in id, ``torchvision:NAME`` or ``module.path:factory``."""
    if not name or not name.strip():
        raise InputError(f"{cli_flag('workload')} must be a non-empty name", "workload")
    name = name.strip()
    if name in BUILTIN_WORKLOADS:
        b = BUILTIN_WORKLOADS[name]
        net: type[nn.Module] = getattr(nets, b.net)
        return WorkloadSpec(name=name, model_factory=lambda: net(b.num_classes), input_shape=b.input_shape,
                            num_classes=b.num_classes, dataset_size=b.train_samples, dataset=b.dataset)
    if name.startswith("torchvision:"):
        return _torchvision_workload(name)
    if ":" in name:
        return _user_workload(name)
    raise unknown_workload(name)


# ---------------------------------------------------------------- image decoding (Pillow)

def _pillow_image(what: str) -> Any:
    """``PIL.Image``; InputError (field ``data``) naming the extra that installs Pillow when it is missing."""
    try:
        from PIL import Image
    except ImportError:
        raise InputError(f"{what}: decoding images needs Pillow, which the profiler extra installs: "
                         "pip install 'jetpredict[profiler]'", "data") from None
    return Image


def decode_image(path: str | Path) -> np.ndarray:
    """Decode an image file to HxWxC uint8 (grey stays one channel, any other mode becomes RGB) with Pillow;
    InputError (field ``data``) naming the file when its content is none of :data:`IMAGE_FORMATS`."""
    image_module = _pillow_image(f"cannot decode {path}")
    try:
        opened = image_module.open(path, formats=_PILLOW_FORMATS)
    except image_module.UnidentifiedImageError:
        raise InputError(f"--data: {path} is not an image in one of the formats {', '.join(_PILLOW_FORMATS)} (its "
                         "content is another format or damaged); remove it or convert it", "data") from None
    with opened as im:
        arr = np.array(im.convert("RGB") if im.mode not in ("L", "RGB") else im)  # writable copy for torch
    return arr[..., None] if arr.ndim == 2 else arr


# ---------------------------------------------------------------- datasets and augmentation

#: Per-channel normalisation (ImageNet statistics; grey uses their mean).
_MEAN = torch.tensor([0.485, 0.456, 0.406])
_STD = torch.tensor([0.229, 0.224, 0.225])


def augment(image: torch.Tensor, input_shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """The training transform, on the CPU: uint8 HxWxC -> float CxHxW of ``input_shape``.

    Channel fix-up, resize to the input size when it differs, then for colour inputs a random crop with
    4-pixel padding (CIFAR style) and a random horizontal flip, then scaling to [0, 1] and normalisation.
    """
    c, h, w = input_shape
    x = image.permute(2, 0, 1).float()
    if x.shape[0] != c:
        x = x[:3].mean(0, keepdim=True) if c == 1 else x[:1].expand(c, -1, -1)
    if x.shape[1:] != (h, w):
        x = F.interpolate(x[None], size=(h, w), mode="bilinear", align_corners=False)[0]
    if c == 3:
        pad = 4
        x = F.pad(x, (pad, pad, pad, pad))
        dy, dx = (int(v) for v in torch.randint(0, 2 * pad + 1, (2,), generator=generator))
        x = x[:, dy:dy + h, dx:dx + w]
        if bool(torch.rand((), generator=generator) < 0.5):
            x = x.flip(2)
    x = x / 255.0
    mean = _MEAN.mean().view(1, 1, 1) if c == 1 else _MEAN[:c].view(c, 1, 1)
    std = _STD.mean().view(1, 1, 1) if c == 1 else _STD[:c].view(c, 1, 1)
    return ((x - mean) / std).contiguous()


class SyntheticImages(Dataset):
    """``size`` random uint8 images of ``input_shape``, deterministic per index, through :func:`augment`."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, size: int, seed: int = 0) -> None:
        self.input_shape, self.num_classes, self.size, self.seed = tuple(input_shape), num_classes, size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        if len(self.input_shape) != 3:  # non-image inputs: plain normal noise of the right shape
            return torch.randn(self.input_shape, generator=g), index % self.num_classes
        c, h, w = self.input_shape
        image = torch.randint(0, 256, (h, w, c), dtype=torch.uint8, generator=g)
        return augment(image, self.input_shape, g), index % self.num_classes


class ImageFolderDataset(Dataset):
    """ImageFolder layout (``root/<class>/<image>``): classes are the sorted sub-directories."""

    def __init__(self, root: str | Path, input_shape: tuple[int, ...], seed: int = 0) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise InputError(f"--data {root}: not a directory (expected ImageFolder layout root/class/img)",
                             "data")
        self.classes = sorted(d.name for d in self.root.iterdir() if d.is_dir())
        self.samples = [(p, i) for i, cls in enumerate(self.classes)
                        for p in sorted((self.root / cls).rglob("*"))
                        if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
        if not self.samples:
            raise InputError(f"--data {root}: no images (extensions {', '.join(IMAGE_EXTENSIONS)}) in "
                             "class sub-directories", "data")
        # Fail before training starts, not inside a DataLoader worker halfway through a mode.
        _pillow_image(f"--data {root}")
        self.input_shape, self.seed, self._epoch_draws = tuple(input_shape), seed, 0

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        self._epoch_draws += 1
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index * 7919 + self._epoch_draws)
        image = torch.from_numpy(np.ascontiguousarray(decode_image(path)))
        return augment(image, self.input_shape, g), label


@dataclass
class BuiltWorkload:
    """A workload ready to train: model (on ``device``), data source, loss, optimizer and epoch size."""

    spec: WorkloadSpec
    model: nn.Module
    loss_fn: Callable[[Any, Any], torch.Tensor]
    optimizer: torch.optim.Optimizer
    dataset: Dataset | None
    batches: Callable[[], Iterable[Any]] | None
    batch_size: int
    num_workers: int
    minibatches_per_epoch: int
    device: torch.device
    data_source: str

    def make_loader(self) -> Iterable[Any]:
        """A fresh iterable of minibatches (a DataLoader unless the factory supplies its own batches)."""
        if self.batches is not None:
            return self.batches()
        assert self.dataset is not None
        workers = self.num_workers
        return DataLoader(self.dataset, batch_size=self.batch_size, shuffle=True, drop_last=True,
                          num_workers=workers, pin_memory=self.device.type == "cuda",
                          persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)

    def example_input(self) -> Any:
        """One sample with a batch dimension of 1 (for complexity counting)."""
        if self.spec.input_shape is not None and self.spec.parts is None:
            return torch.zeros((1, *self.spec.input_shape))
        if self.dataset is not None:
            x = self.dataset[0][0]
            return x.unsqueeze(0) if isinstance(x, torch.Tensor) else x
        if self.batches is not None:
            x = next(iter(self.batches()))[0]
            return x[:1] if isinstance(x, torch.Tensor) else x
        return torch.zeros((1, *self.spec.input_shape))  # type: ignore[misc]


def build_workload(spec: WorkloadSpec | str, batch_size: int | None = None, num_workers: int | None = None,
                   data_dir: str | Path | None = None, device: str | torch.device = "cpu",
                   seed: int = 0) -> BuiltWorkload:
    """Build model, data, loss and optimizer. ``data_dir`` = ImageFolder root (else synthetic data)."""
    if isinstance(spec, str):
        spec = resolve_workload(spec)
    batch_size, num_workers = loader_settings(batch_size, num_workers, default_batch_size=BATCH_SIZE)
    torch.manual_seed(seed)
    device = torch.device(device)
    parts = spec.parts
    batches = parts.batches if parts is not None else None
    loss_fn: Callable[[Any, Any], torch.Tensor] = (parts.loss if parts is not None and parts.loss is not None
                                                   else nn.CrossEntropyLoss())
    if data_dir is not None:
        if spec.input_shape is None or len(spec.input_shape) != 3:
            raise InputError(f"--data needs an image workload (CxHxW input); {spec.name!r} has "
                             f"input {spec.input_shape}", "data")
        dataset: Dataset | None = ImageFolderDataset(data_dir, spec.input_shape, seed)
        spec = replace(spec, dataset_size=len(dataset), dataset=f"folder:{data_dir}",  # type: ignore[arg-type]
                       parts=replace(parts, dataset=None, batches=None, minibatches_per_epoch=None)
                       if parts is not None else None)
        batches, source = None, f"folder:{data_dir}"
    elif parts is not None and (parts.dataset is not None or parts.batches is not None):
        dataset, source = parts.dataset, "user"
    else:
        size = spec.dataset_size or DEFAULT_SYNTHETIC_SAMPLES
        dataset, source = SyntheticImages(spec.input_shape, spec.num_classes, size, seed), "synthetic"  # type: ignore[arg-type]
    if dataset is not None and hasattr(dataset, "__len__"):
        check_batch_fits(batch_size, len(dataset), spec.name)  # type: ignore[arg-type]
    model = spec.model_factory().to(device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if parts is not None and parts.optimizer is not None:
        try:
            optimizer = parts.optimizer(params)
        except Exception as exc:
            raise InputError(user_code_failed(spec.name, "its optimizer(params)", exc), "workload") from exc
    else:
        optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    mpe = spec.minibatches_per_epoch(batch_size)
    return BuiltWorkload(spec=spec, model=model, loss_fn=loss_fn, optimizer=optimizer, dataset=dataset,
                         batches=batches, batch_size=batch_size,
                         num_workers=0 if batches is not None else num_workers,
                         minibatches_per_epoch=mpe, device=device, data_source=source)
