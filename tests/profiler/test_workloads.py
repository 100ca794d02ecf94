"""Workloads: the registry, module:factory and torchvision names, synthetic and ImageFolder data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.profiler import nets
from jetpredict.profiler import workloads as wl
from jetpredict.profiler.loader import check_batch_fits

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.syspath_prepend(str(HERE))
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("name", "mpe", "shape", "classes"), [
    ("lenet5-mnist", 3750, (1, 28, 28), 10),
    ("resnet18-cifar10", 3125, (3, 32, 32), 10),
    ("mobilenetv3-small-gld23k", 1443, (3, 224, 224), 203),
    ("vgg11-cifar10", 3125, (3, 32, 32), 10),
])
def test_builtin_minibatches_per_epoch_at_batch_16(name, mpe, shape, classes):
    spec = wl.resolve_workload(name)
    assert spec.minibatches_per_epoch(16) == mpe
    assert spec.input_shape == shape and spec.num_classes == classes


@pytest.mark.parametrize(("name", "net", "dataset"), [
    ("lenet5-mnist", "LeNet5", "MNIST"),
    ("resnet18-cifar10", "ResNet18", "CIFAR-10"),
    ("mobilenetv3-small-gld23k", "MobileNetV3Small", "GLD-23k"),
    ("vgg11-cifar10", "VGG11BN", "CIFAR-10"),
])
def test_builtin_names_build_their_documented_network_with_one_output_per_class(name, net, dataset):
    """The name is the network: vgg11-cifar10 building a ResNet-18, or mobilenetv3-small-gld23k a 1000-way head
    for 203 landmark classes, passed every count above while profiling another model's cost."""
    spec = wl.resolve_workload(name)
    model = spec.model_factory()
    assert type(model) is getattr(nets, net) and spec.dataset == dataset
    model.eval()
    with torch.no_grad():
        assert model(torch.zeros(1, *spec.input_shape)).shape == (1, spec.num_classes)


def test_unknown_names_are_input_errors_naming_the_field():
    with pytest.raises(UnknownWorkloadError) as err:
        wl.resolve_workload("resnet-1000")
    assert err.value.field == "workload" and "lenet5-mnist" in err.value.message
    with pytest.raises(UnknownWorkloadError, match="cannot import module"):
        wl.resolve_workload("no_such_module_xyz:factory")
    with pytest.raises(UnknownWorkloadError, match="no callable"):
        wl.resolve_workload("user_models:missing")
    with pytest.raises(InputError, match="non-empty"):
        wl.resolve_workload("  ")


def test_a_model_file_named_like_a_module_that_comes_first_says_which_file_was_loaded(tmp_path, monkeypatch):
    """The working directory goes last on sys.path (safer under sudo), so a user's json.py (or test.py) is not the
    module loaded; the error said only "module 'json' has no callable 'make'". It names the file loaded, the
    user's file that was passed over, and asks for a rename."""
    import json

    (tmp_path / "json.py").write_text("def make():\n    raise AssertionError('never loaded')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the profiler appends the working directory
    with pytest.raises(UnknownWorkloadError) as err:
        wl.resolve_workload("json:make")
    said = err.value.message
    assert err.value.field == "workload"
    assert f"module 'json' (loaded from {json.__file__}) has no callable 'make'" in said, said
    assert f"{tmp_path / 'json.py'} is not the file loaded" in said and "rename your file" in said, said
    with pytest.raises(UnknownWorkloadError, match=r"module 'user_models' \(loaded from .*user_models\.py\) has no "
                       r"callable 'missing'$"):
        wl.resolve_workload("user_models:missing")  # no file of that name is passed over: no rename asked


def test_user_factory_with_its_own_dataset_and_loss_trains():
    built = wl.build_workload("user_models:lstm_language_model", batch_size=4, num_workers=0)
    assert built.data_source == "user" and built.minibatches_per_epoch == 512  # 2048 windows / 4
    assert isinstance(built.optimizer, torch.optim.Adam)
    x, y = next(iter(built.make_loader()))
    assert x.shape == (4, 12) and y.shape == (4, 12)
    loss = built.loss_fn(built.model(x), y)
    loss.backward()
    assert loss.item() > 0 and built.model.head.weight.grad is not None


def test_user_classification_tuple_uses_synthetic_images():
    built = wl.build_workload("user_models:tiny_classifier", batch_size=3, num_workers=0)
    assert built.data_source == "synthetic"
    x, y = next(iter(built.make_loader()))
    assert x.shape == (3, 3, 8, 8) and int(y.max()) < 5


@pytest.mark.parametrize(("factory", "message"), [
    ("model_only", "only a model"),
    ("dataset_without_loss", "must also return 'loss'"),
    ("wants_an_argument", "must take no arguments"),  # a TypeError traceback before
    # Accepted before, and failed later inside torch (or trained on an input of no shape):
    ("model_text", "'model' must be a torch.nn.Module"),
    ("model_no_shape", "give input_shape and num_classes"),
    ("model_no_classes", "give input_shape and num_classes"),
])
def test_incomplete_factories_say_what_is_missing(factory, message):
    with pytest.raises(InputError, match=message) as err:
        wl.resolve_workload(f"user_models:{factory}")
    assert err.value.field == "workload" and f"--workload 'user_models:{factory}'" in err.value.message


def test_user_epoch_size_is_50000_samples_unless_the_factory_gives_one():
    """The module docstring's rule: synthetic classification assumes CIFAR-10's 50,000 samples; a factory's
    ``dataset_size`` sets ceil(size / batch) minibatches and its ``minibatches_per_epoch`` wins over both."""
    assert wl.resolve_workload("user_models:tiny_classifier").minibatches_per_epoch(16) == 3125
    assert wl.resolve_workload("user_models:sized").minibatches_per_epoch(16) == 7  # ceil(100 / 16)
    assert wl.build_workload("user_models:told", batch_size=16, num_workers=0).minibatches_per_epoch == 3


def test_complexity_is_counted_on_one_sample_whatever_the_data_source():
    """FLOPs, activation bytes and kernels are per sample: the example input holds one sample for a built-in
    network, a classifier on synthetic data, a user dataset and user batches alike (not a whole minibatch)."""
    for name, shape in (("lenet5-mnist", (1, 1, 28, 28)), ("user_models:tiny_classifier", (1, 3, 8, 8)),
                        ("user_models:lstm_language_model", (1, 12)), ("user_models:batches", (1, 4))):
        assert wl.build_workload(name, batch_size=8, num_workers=0).example_input().shape == shape, name


def test_synthetic_images_are_deterministic_normalised_and_shaped():
    ds = wl.SyntheticImages((3, 32, 32), 10, 100, seed=1)
    a, la = ds[5]
    b, lb = ds[5]
    assert a.shape == (3, 32, 32) and a.dtype == torch.float32
    assert torch.equal(a, b) and la == lb == 5
    assert -3.0 < float(a.mean()) < 3.0 and float(a.std()) > 0.5
    assert not torch.equal(ds[6][0], a)


def test_bad_batch_and_worker_counts():
    with pytest.raises(InputError) as err:
        wl.build_workload("lenet5-mnist", batch_size=0)
    assert err.value.field == "batch_size"
    with pytest.raises(InputError) as err:
        wl.build_workload("lenet5-mnist", num_workers=-1)
    assert err.value.field == "workers"


def test_a_batch_as_large_as_the_dataset_fits_and_one_sample_more_does_not():
    check_batch_fits(4, 4)
    with pytest.raises(InputError, match="--batch-size 5 is larger than the dataset \\(4 samples\\)") as err:
        check_batch_fits(5, 4)
    assert err.value.field == "batch_size"


# ---------------------------------------------------------------- ImageFolder with real encoded files

@pytest.fixture
def pil_image():
    """``PIL.Image`` (the profiler extra installs Pillow, which decodes every ``--data`` image)."""
    return pytest.importorskip("PIL.Image")


@pytest.mark.parametrize(("channels", "kept"), [(1, 1), (3, 3), (4, 3)])
def test_png_decodes_to_grey_or_rgb(tmp_path, pil_image, channels, kept):
    img = np.random.default_rng(channels).integers(0, 256, (11, 7, channels), dtype=np.uint8)
    pil_image.fromarray(img[..., 0] if channels == 1 else img).save(tmp_path / "x.png")
    assert np.array_equal(wl.decode_image(tmp_path / "x.png"), img[..., :kept])


def test_pgm_and_ppm_decode(tmp_path, pil_image):
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    (tmp_path / "g.pgm").write_bytes(b"P5\n# comment\n4 3\n255\n" + grey.tobytes())
    rgb = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    (tmp_path / "c.ppm").write_bytes(b"P6 4 2 255\n" + rgb.tobytes())
    assert np.array_equal(wl.decode_image(tmp_path / "g.pgm")[..., 0], grey)
    assert np.array_equal(wl.decode_image(tmp_path / "c.ppm"), rgb)


def _image_folder(root: Path, classes: int = 2, per_class: int = 5, size: int = 20) -> Path:
    """PNG images (written with Pillow; skips without it) in ``root/class<c>/``, plus a non-image file."""
    image_module = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    for c in range(classes):
        d = root / f"class{c}"
        d.mkdir(parents=True)
        for i in range(per_class):
            image_module.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(d / f"{i}.png")
    (root / "README.txt").write_text("not an image")
    return root


def test_image_folder_sets_epoch_size_and_decodes_in_the_pipeline(tmp_path):
    root = _image_folder(tmp_path / "data")
    built = wl.build_workload("resnet18-cifar10", batch_size=4, num_workers=0, data_dir=root)
    assert built.data_source.startswith("folder:")
    assert built.minibatches_per_epoch == 3  # ceil(10 images / 4)
    ds = built.dataset
    assert ds.classes == ["class0", "class1"] and len(ds) == 10
    x, label = ds[7]
    assert x.shape == (3, 32, 32) and label == 1  # 20x20 resized to the workload's 32x32
    grey = wl.build_workload("lenet5-mnist", batch_size=2, num_workers=0, data_dir=root)
    assert grey.dataset[0][0].shape == (1, 28, 28)


def test_image_folder_errors_name_the_data_field(tmp_path):
    with pytest.raises(InputError) as err:
        wl.build_workload("lenet5-mnist", data_dir=tmp_path / "missing")
    assert err.value.field == "data"
    (tmp_path / "empty" / "cls").mkdir(parents=True)
    with pytest.raises(InputError, match="no images"):
        wl.build_workload("lenet5-mnist", data_dir=tmp_path / "empty")
    root = _image_folder(tmp_path / "small", classes=1, per_class=2)
    with pytest.raises(InputError) as err:
        wl.build_workload("lenet5-mnist", batch_size=16, data_dir=root)
    assert err.value.field == "batch_size"


def test_images_without_pillow_fail_before_training_naming_the_extra(tmp_path, monkeypatch):
    root = _image_folder(tmp_path / "data", classes=1, per_class=2)
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if Pillow were not installed
    with pytest.raises(InputError, match=r"jetpredict\[profiler\]") as err:
        wl.build_workload("resnet18-cifar10", batch_size=1, num_workers=0, data_dir=root)
    assert err.value.field == "data"
    with pytest.raises(InputError, match=r"Pillow.*jetpredict\[profiler\]"):
        wl.decode_image(root / "class0" / "0.png")


def test_jpeg_folder_decodes_with_pillow(tmp_path, pil_image):
    root = tmp_path / "data"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(2):
            pixels = np.random.default_rng(i).integers(0, 255, (40, 40, 3), dtype=np.uint8)
            pil_image.fromarray(pixels).save(root / cls / f"{i}.jpg")
    assert wl.decode_image(root / "a" / "0.jpg").shape == (40, 40, 3)
    workload = wl.build_workload("resnet18-cifar10", batch_size=2, num_workers=0, data_dir=root)
    assert workload.minibatches_per_epoch == 2


@pytest.mark.parametrize("failure", ['raise ImportError("No module named torchvision")',
                                     'raise RuntimeError("operator torchvision::nms does not exist")',
                                     "raise OSError('libc10.so: cannot open shared object file')"])
def test_a_torchvision_that_does_not_load_is_refused_in_words(tmp_path, monkeypatch, failure):
    """Missing, or built for another torch (frequent with Jetson wheels): the latter raises RuntimeError or
    OSError on import, not ImportError, and escaped as a failed run (exit 1) that named neither torchvision
    nor --workload."""
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "__init__.py").write_text(failure + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    with pytest.raises(UnknownWorkloadError) as err:
        wl.resolve_workload("torchvision:resnet50")
    assert err.value.field == "workload" and "needs torchvision, which does not import here" in err.value.message
    assert failure.split("(")[0].removeprefix("raise ") in err.value.message  # what went wrong, by its type


@pytest.mark.parametrize(("result", "said"), [
    # Both said only "got tuple" before.
    (("hello", (32,), 10), "got a 3-item tuple whose item 0 is a str, not a torch.nn.Module"),
    ((torch.nn.Linear(3, 2), (3,)), "got a 2-item tuple, not 3 items"),
    (("hello", (3,)), "got a 2-item tuple, not 3 items, whose item 0 is a str, not a torch.nn.Module"),
    ([torch.nn.Linear(3, 2), (3,), 2], "got a 3-item list: return a tuple"),
    ("hello", "got a str"),
])
def test_a_factory_of_the_wrong_shape_is_told_what_it_returned(result, said):
    where = "--workload 'm:f': its factory f()"
    with pytest.raises(InputError) as err:
        wl._parts_from_factory(result, where)
    assert err.value.field == "workload" and err.value.message.startswith(where)
    assert "must return (model, input_shape, num_classes) or a mapping with 'model'" in err.value.message
    assert said in err.value.message, err.value.message


def test_the_readme_states_the_epoch_a_classifier_without_dataset_size_is_given():
    """Prose cannot import: README's Workloads bullet restates DEFAULT_SYNTHETIC_SAMPLES and its minibatches."""
    text = " ".join((HERE.parents[1] / "README.md").read_text(encoding="utf-8").split())
    mpe = wl.resolve_workload("user_models:tiny_classifier").minibatches_per_epoch(16)
    said = (f"without `dataset_size` is taken to have {wl.DEFAULT_SYNTHETIC_SAMPLES:,} samples per epoch "
            f"(CIFAR-10's), which sets every s/epoch figure: {mpe} minibatches at batch 16")
    assert said in text
