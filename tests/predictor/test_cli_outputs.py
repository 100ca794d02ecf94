"""What ``--out`` and ``--plot`` write: a whole file or none, through a symlink to the file it names, into a
FIFO or device as a plain write would, and never over a file the verb reads."""

from __future__ import annotations

import errno
import os
import select
import stat
import threading
from pathlib import Path

import pytest
from jetpredict.predictor import cli as predictor_cli
from jetpredict.predictor import cli_files

from jetpredict.cli import main


def _predict_all(work: Path, out: Path) -> list[str]:
    return ["predict", "--model", str(work / "resnet.json"), "--all", "--out", str(out)]


def _verb_argv(work: Path, verb: str) -> list[str]:
    """The argv of ``verb`` (fit, predict, plan or recommend) on ``work``'s fit, before any --out or --plot."""
    return {"fit": ["fit", "--device", "agx-xavier", "--profiles", str(work / "resnet.csv")],
            "predict": ["predict", "--model", str(work / "resnet.json"), "--presets"],
            "plan": ["plan", "--device", "agx-xavier", "--budget", "2"],
            "recommend": ["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time"]}[verb]


def test_an_interrupted_or_failed_write_leaves_the_previous_file(work, tmp_path, monkeypatch, capsys):
    """The answer is written once complete: Ctrl-C while the table is written, or a full disk, used to leave
    a cut-off CSV that ``--modes`` then read as a shorter table (4,686 of 29,232 rows)."""
    out = tmp_path / "all.csv"
    out.write_text("the previous answer\n")
    real_write_table = predictor_cli.write_table

    def cut_off(frame, fmt, stream, **kw):
        real_write_table(frame.head(3), fmt, stream, **kw)  # part of the table is out when the user stops
        raise KeyboardInterrupt

    monkeypatch.setattr(predictor_cli, "write_table", cut_off)
    assert main(_predict_all(work, out)) == 130
    assert out.read_text() == "the previous answer\n"
    monkeypatch.undo()

    def disk_full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cli_files, "write_out_file", disk_full)
    capsys.readouterr()
    assert main(_predict_all(work, out)) == 1  # a failure to write, not bad input
    assert "cannot write --out" in capsys.readouterr().err and out.read_text() == "the previous answer\n"


def test_out_through_a_symlink_writes_the_file_it_names(work, tmp_path, capsys):
    (tmp_path / "answers").mkdir()
    link = tmp_path / "latest.csv"
    link.symlink_to(tmp_path / "answers" / "run1.csv")
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets", "--out", str(link)]) == 0
    assert link.is_symlink() and (tmp_path / "answers" / "run1.csv").read_text().startswith("mode,")


def test_out_into_a_fifo_streams_and_keeps_it_a_fifo(work, tmp_path, capsys):
    """A device or FIFO (``--out /dev/null``) is written into: a rename would put a regular file there."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets", "--format", "csv",
                 "--out", str(fifo)]) == 0
    reader.join(timeout=30)
    assert got and got[0].startswith(b"mode,") and stat.S_ISFIFO(fifo.stat().st_mode)


#: Seconds a FIFO test waits for the CLI before it counts as hung (it answers in well under one).
FIFO_DEADLINE_S = 60


def _run_bounded(argv: list[str], fifo: Path) -> int | None:
    """``main(argv)`` in a thread, its exit status or None when it is still blocked after the deadline:
    then a reader opens and closes ``fifo`` once to release it, so a hang fails the test, never the suite."""
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    worker.start()
    worker.join(timeout=FIFO_DEADLINE_S)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        worker.join(timeout=FIFO_DEADLINE_S)
        return None
    return codes[0]


@pytest.mark.parametrize("verb, flag", [("predict", "out"), ("plan", "out"), ("recommend", "out"),
                                        ("recommend", "plot")])
def test_out_a_fifo_no_process_reads_is_refused_at_once(work, tmp_path, capsys, verb, flag):
    """Opening a FIFO to write blocks until a reader comes: the verb used to hang for ever (--plot too, which
    matplotlib wrote to the path itself)."""
    if flag == "plot":
        pytest.importorskip("matplotlib", reason="--plot needs the [plot] extra (in [dev])")
    fifo = tmp_path / ("pipe.svg" if flag == "plot" else "pipe")  # a plot's format is its file's
    os.mkfifo(fifo)
    code = _run_bounded([*_verb_argv(work, verb), f"--{flag}", str(fifo)], fifo)
    err = capsys.readouterr().err
    assert code == 2 and f"cannot write --{flag} {fifo}: no process reads the FIFO" in err, (code, err)
    assert "previous file" not in err and stat.S_ISFIFO(fifo.stat().st_mode)


def test_out_a_fifo_with_a_reader_thread_gets_the_whole_answer(work, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # The read end is open before the verb runs (no race with the writer's non-blocking open); the thread
    # reads until the end of the answer, which the writer's close marks.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []

    def read_all() -> None:
        while select.select([fd], [], [], FIFO_DEADLINE_S)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        code = _run_bounded(["predict", "--model", str(work / "resnet.json"), "--all", "--format", "csv",
                             "--out", str(fifo)], fifo)
        reader.join(timeout=FIFO_DEADLINE_S)
    finally:
        os.close(fd)
    got = b"".join(chunks)
    assert code == 0 and not reader.is_alive()
    assert main(["predict", "--model", str(work / "resnet.json"), "--all", "--format", "csv"]) == 0
    assert got.decode("utf-8") == capsys.readouterr().out  # every byte, past a pipe's 64 KiB buffer


def test_fit_refuses_a_model_path_that_is_not_a_regular_file(work, tmp_path, capsys):
    fifo = tmp_path / "model-pipe"
    os.mkfifo(fifo)
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(work / "resnet.csv"), "--out", str(fifo)])
    err = capsys.readouterr().err
    assert code == 2 and f"{fifo} is not a regular file" in err and "nothing was written" in err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not Path(f"{fifo}.json").exists()


def test_fit_says_once_that_the_previous_files_are_unchanged(work, tmp_path, capsys):
    (tmp_path / "outdir").mkdir()
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(work / "resnet.csv"),
                 "--out", f"{tmp_path / 'outdir'}/"])
    err = capsys.readouterr().err
    assert code == 2 and "Is a directory" in err and err.count("unchanged") == 1, err


@pytest.mark.parametrize("verb, flag", [("fit", "--out"), ("predict", "--out"), ("plan", "--out"),
                                        ("recommend", "--out"), ("recommend", "--plot")])
def test_an_empty_out_is_named_as_profile_names_it(work, tmp_path, capsys, monkeypatch, verb, flag):
    """``--out ''`` said 'Is a directory while writing . and its manifest ..json' (fit) or 'Is a directory'
    after the work (predict, plan, recommend); an empty --plot drew nothing and said nothing."""
    monkeypatch.chdir(tmp_path)
    code = main([*_verb_argv(work, verb), flag, ""] + (["--out", str(tmp_path / "r.csv")] if flag == "--plot" else []))
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} is empty: give a file" in err and "directory" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_recommend_plot_never_overwrites_the_model_it_reads(work, tmp_path, capsys):
    model = tmp_path / "model.svg"  # a model saved under a plot's name
    model.write_bytes((work / "resnet.json").read_bytes())
    Path(f"{model}.json").write_bytes(Path(f"{work / 'resnet.json'}.json").read_bytes())
    before = model.read_bytes()
    code = main(["recommend", "--model", str(model), "--objective", "min-time", "--plot", str(model)])
    assert code == 2 and f"--plot {model} would overwrite {model}, which --model reads" in capsys.readouterr().err
    assert model.read_bytes() == before


@pytest.mark.parametrize("through", ["the same name", "a symlink"])
def test_recommend_refuses_an_out_that_is_also_its_plot(work, tmp_path, capsys, through):
    """--out and --plot naming one file (as typed, or the plot through a link to the answer) would have the
    plot overwrite the answer: refused before any work, nothing written."""
    out = tmp_path / "answer.svg"
    plot = out
    if through == "a symlink":
        plot = tmp_path / "link.svg"
        plot.symlink_to(out.name)
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time", "--out", str(out),
                 "--plot", str(plot)])
    err = capsys.readouterr().err
    assert code == 2 and f"--out {out} is also --plot: the plot would overwrite the answer" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if plot == out else ["link.svg"])


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a symlink another owner needs root")
@pytest.mark.parametrize("planted", ["answer.csv", "model.json.json"])
def test_a_link_another_user_planted_in_a_shared_folder_is_refused_naming_it(work, tmp_path, capsys, planted):
    """``sudo jetpredict fit --out /tmp/model.json`` also writes ``model.json.json``, a name the user never
    typed: a link another user put there (or at the answer's name) must not steer it onto a system file."""
    important = tmp_path / "important.txt"
    important.write_text("root:x:0:0\n")
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / planted
    link.symlink_to(important)
    os.lchown(link, 65534, 65534)
    if planted == "answer.csv":
        argv = ["predict", "--model", str(work / "resnet.json"), "--presets", "--out", str(link)]
    else:
        argv = ["fit", "--device", "agx-xavier", "--profiles", str(work / "resnet.csv"), "--out",
                str(shared / "model.json")]
    capsys.readouterr()
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert f"{link} is a symlink of another user" in said and "Traceback" not in said, said
    assert important.read_text() == "root:x:0:0\n" and link.is_symlink()
    assert not (shared / "model.json").exists()


@pytest.mark.parametrize("verb, flag, out", [("predict", "--out", "p.csv/x.csv"),
                                             ("predict", "--out", "p.csv/sub/x.csv"),
                                             ("fit", "--out", "p.csv/model.json"),
                                             ("recommend", "--plot", "p.csv/plot.svg")])
def test_an_out_whose_folder_is_a_file_names_that_file(work, tmp_path, capsys, monkeypatch, verb, flag, out):
    """``--out p.csv/x.csv`` with p.csv a file said 'File exists' (or 'Not a directory' one folder deeper),
    leaving the user to guess which part of the path was wrong; and said it only once the fit or the
    predictions were done (minutes for ``fit`` or ``--all``): it is refused before any work, writing nothing."""
    from jetpredict.predictor import bundled, service

    monkeypatch.chdir(tmp_path)
    Path("p.csv").write_text("a file\n")
    worked: list[str] = []
    for module, name in ((bundled, "fit_workload"), (service, "predict"), (service, "recommend")):
        monkeypatch.setattr(module, name, _recording(getattr(module, name), name, worked))
    answer = ["--out", str(tmp_path / "r.csv")] if flag == "--plot" else []
    code = main([*_verb_argv(work, verb), *answer, flag, out])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} {out}: p.csv is a file, not a folder" in err, err
    assert Path("p.csv").read_text() == "a file\n"
    assert worked == [] and sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]


def _recording(real, name: str, calls: list[str]):
    """``real``, noting ``name`` in ``calls`` each time it runs."""
    def run(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)
    return run
