"""A file replaced whole keeps its permissions, and a failed replacement leaves the old bytes and no temp file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from jetpredict.models import atomic_files
from jetpredict.models.atomic_files import replace_file


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umasks_bits_an_old_one_keeps_its_own_and_mode_wins(tmp_path):
    old_umask = os.umask(0o027)
    try:
        new = tmp_path / "new.json"
        replace_file(new, b"1")
        assert new.read_bytes() == b"1" and _mode(new) == 0o640
        os.chmod(new, 0o604)
        replace_file(new, b"2")
        assert new.read_bytes() == b"2" and _mode(new) == 0o604
        replace_file(new, b"3", mode=0o600)
        assert new.read_bytes() == b"3" and _mode(new) == 0o600
    finally:
        os.umask(old_umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failure_leaves_the_old_bytes_and_no_temporary_file(tmp_path, monkeypatch, step):
    path = tmp_path / "state.json"
    path.write_bytes(b"old")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, step, fail)
    with pytest.raises(OSError, match="No space"):
        replace_file(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_name_at_the_byte_limit_is_replaced_through_a_temporary_name_within_it(tmp_path):
    # 83 three-byte characters: a 253-byte name (255 is the limit); cut by characters, its temporary name
    # was 271 bytes.
    path = tmp_path / ("模" * 83 + ".csv")
    assert len(path.name.encode()) == 253
    replace_file(path, b"rows")
    atomic_files.probe_folder(path)
    assert path.read_bytes() == b"rows"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize(("name", "kept"), [("a" * 199 + "é" * 10 + ".csv", "a" * 199),
                                            (os.fsdecode(b"r\xe9sultats.csv"), os.fsdecode(b"r\xe9sultats.csv"))],
                         ids=["a character across the cut", "bytes that are not UTF-8"])
def test_a_temporary_name_keeps_whole_characters_and_the_names_own_bytes(tmp_path, name, kept):
    """Cut at the byte limit, never within a character; a name the file system holds as bytes that are not UTF-8
    (Latin-1 'é') keeps them (decoded and encoded back, it was the name without them)."""
    temp = atomic_files.temp_name(tmp_path / name)
    assert temp.parent == tmp_path and temp.name.startswith(f".{kept}.") and temp.name.endswith(".tmp")
    replace_file(tmp_path / name, b"rows")
    assert os.listdir(tmp_path) == [name]


#: A user who is not the caller (uid 65534 is ``nobody`` on Debian and Ubuntu).
OTHER_UID = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a symlink another owner needs root")


def _shared(folder):
    """``folder`` made like ``/tmp``: world-writable and sticky, owned by the caller."""
    folder.mkdir()
    os.chmod(folder, 0o1777)
    return folder


@needs_root
def test_a_link_another_user_planted_in_a_shared_folder_is_not_followed(tmp_path):
    # As root, following it would have replaced /etc/passwd (or any file) with the output.
    important = tmp_path / "important.txt"
    important.write_text("root:x:0:0\n")
    shared = _shared(tmp_path / "tmp")
    planted = shared / "p.csv.json"
    planted.symlink_to(important)
    os.lchown(planted, OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError) as err:
        atomic_files.write_output(planted, b"{}")
    assert str(planted) in str(err.value) and "another user" in str(err.value)
    with pytest.raises(PermissionError):
        atomic_files.probe_folder(planted)
    assert important.read_text() == "root:x:0:0\n" and planted.is_symlink()


@needs_root
def test_links_the_kernel_lets_a_process_follow_are_followed(tmp_path):
    shared, plain = _shared(tmp_path / "tmp"), tmp_path / "home"
    plain.mkdir()
    answers = tmp_path / "answers.csv"
    mine = shared / "mine.csv"  # the caller's own link in the shared folder
    mine.symlink_to(answers)
    theirs = plain / "theirs.csv"  # another user's link, in a folder that is not shared
    theirs.symlink_to("../answers.csv")  # relative to its folder
    os.lchown(theirs, OTHER_UID, OTHER_UID)
    chain = shared / "chain.csv"  # the caller's link to another link
    chain.symlink_to(theirs)
    for link in (mine, theirs, chain):
        assert atomic_files.followed(link) == answers
        atomic_files.write_output(link, link.name.encode())
        assert answers.read_bytes() == link.name.encode() and link.is_symlink()
    loop = plain / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OSError) as err:
        atomic_files.followed(loop)
    assert err.value.errno == errno.ELOOP


@needs_root
def test_a_folder_link_another_user_planted_on_the_way_is_not_followed(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    shared = _shared(tmp_path / "tmp")
    (shared / "results").symlink_to(target)
    os.lchown(shared / "results", OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError) as err:
        atomic_files.write_output(shared / "results" / "p.csv.json", b"{}")
    assert f"{shared / 'results'} is a symlink of another user" in str(err.value)
    assert list(target.iterdir()) == []


def test_links_resolve_where_the_kernel_resolves_them(tmp_path, monkeypatch):
    """Relative links against their real folder, ``..`` after a link to the link target's parent: where
    os.path.realpath (and a plain write) land, not where text joined before resolving points."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "rel").mkdir()
    (tmp_path / "rel" / "L").symlink_to("../a/b")  # rel/L -> a/b
    (tmp_path / "a" / "b" / "x").symlink_to("../c")  # a/b/x -> a/c
    (tmp_path / "abs").symlink_to(tmp_path / "a")
    monkeypatch.chdir(tmp_path / "rel")
    for path in (tmp_path / "rel" / "L" / "x", tmp_path / "rel" / "L" / ".." / "out.csv", tmp_path / "abs" / "b" / "x",
                 "L/x", "./L/../b/new.csv", tmp_path / "missing" / "out.csv"):
        assert atomic_files.followed(path) == Path(os.path.realpath(path)), path
    assert atomic_files.followed(tmp_path / "rel" / "L" / "x") == tmp_path / "a" / "c"


def _fail_on_call(monkeypatch, name: str, call: int, error: BaseException) -> None:
    """``os.<name>`` raises ``error`` on its ``call``-th call (1-based), and works as usual otherwise."""
    real, calls = getattr(os, name), []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == call:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic_files.os, name, failing)


def _pair(tmp_path) -> tuple[Path, Path]:
    data, companion = tmp_path / "rows.csv", tmp_path / "rows.csv.json"
    data.write_bytes(b"old rows")
    companion.write_bytes(b"old sidecar")
    return data, companion


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
@pytest.mark.parametrize(("step", "name", "call", "failed"), [
    ("the file's temporary write", "fsync", 1, "rows.csv"), ("the companion's temporary write", "fsync", 2,
                                                             "rows.csv.json"),
    ("the first rename", "replace", 1, "rows.csv"), ("the second rename", "replace", 2, "rows.csv.json")])
def test_replace_pair_failing_at_any_step_leaves_the_previous_pair(tmp_path, monkeypatch, code, step, name, call,
                                                                   failed):
    data, companion = _pair(tmp_path)
    _fail_on_call(monkeypatch, name, call, OSError(code, os.strerror(code)))
    with pytest.raises(atomic_files.PairWriteError) as e:
        atomic_files.replace_pair(data, b"new rows", companion, b"new sidecar", "the rows and their sidecar")
    monkeypatch.undo()
    assert e.value.errno == code and e.value.reason == os.strerror(code) and e.value.restored, step
    assert e.value.filename == str(tmp_path / failed), step
    assert e.value.strerror == (f"{os.strerror(code)} while writing the rows and their sidecar; the previous files "
                                "(if any) are unchanged"), step
    assert (data.read_bytes(), companion.read_bytes()) == (b"old rows", b"old sidecar"), step
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "rows.csv.json"], step


def test_replace_pair_replaces_both_and_an_interrupt_at_the_second_rename_puts_the_first_back(tmp_path,
                                                                                            monkeypatch):
    data, companion = _pair(tmp_path)
    _fail_on_call(monkeypatch, "replace", 2, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        atomic_files.replace_pair(data, b"new rows", companion, b"new sidecar", "the pair")
    monkeypatch.undo()
    assert (data.read_bytes(), companion.read_bytes()) == (b"old rows", b"old sidecar")
    atomic_files.replace_pair(data, b"new rows", companion, b"new sidecar", "the pair")
    assert (data.read_bytes(), companion.read_bytes()) == (b"new rows", b"new sidecar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "rows.csv.json"]


def test_replace_pair_without_hard_links_keeps_a_copy_to_put_back(tmp_path, monkeypatch):
    """A file system without hard links: the previous file is copied aside instead, and put back."""
    data, companion = _pair(tmp_path)
    _fail_on_call(monkeypatch, "link", 1, OSError(errno.EPERM, "Operation not permitted"))
    _fail_on_call(monkeypatch, "replace", 2, OSError(errno.EIO, os.strerror(errno.EIO)))
    with pytest.raises(atomic_files.PairWriteError, match="unchanged"):
        atomic_files.replace_pair(data, b"new rows", companion, b"new sidecar", "the pair")
    monkeypatch.undo()
    assert (data.read_bytes(), companion.read_bytes()) == (b"old rows", b"old sidecar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "rows.csv.json"]


def test_replace_pair_says_where_the_previous_file_is_when_it_cannot_be_put_back(tmp_path, monkeypatch):
    """The second rename fails and so does the rename that puts the first file back: the error says so and
    the previous file is kept, not removed with the temporary files."""
    data, companion = _pair(tmp_path)
    real, calls = os.replace, []

    def replace(src, dst, *a, **kw):
        calls.append(dst)
        if len(calls) >= 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(atomic_files.os, "replace", replace)
    with pytest.raises(atomic_files.PairWriteError) as e:
        atomic_files.replace_pair(data, b"new rows", companion, b"new sidecar", "the pair")
    monkeypatch.undo()
    assert not e.value.restored and e.value.filename == str(companion)
    kept = [p for p in tmp_path.iterdir() if p.name.endswith(".old")]
    assert len(kept) == 1 and kept[0].read_bytes() == b"old rows"
    assert e.value.strerror == (f"{os.strerror(errno.EIO)} while writing the pair: the new rows.csv is in place "
                                f"beside the previous rows.csv.json; the previous file is kept as {kept[0]}")
    assert (data.read_bytes(), companion.read_bytes()) == (b"new rows", b"old sidecar")


@pytest.mark.parametrize("out", ["p.csv/x.csv", "p.csv/sub/x.csv", "link/x.csv"])
def test_make_out_folder_names_the_part_of_the_path_that_is_a_file(tmp_path, monkeypatch, out):
    """mkdir's 'File exists' / 'Not a directory' did not say which component was the file."""
    monkeypatch.chdir(tmp_path)
    Path("p.csv").write_text("a file\n")
    Path("link").symlink_to("p.csv")
    with pytest.raises(OSError) as caught:
        atomic_files.make_out_folder(out)
    assert caught.value.errno == errno.ENOTDIR
    assert caught.value.strerror == f"{out.split('/')[0]} is a file, not a folder"
    assert Path("p.csv").read_text() == "a file\n"


def test_make_out_folder_creates_missing_folders(tmp_path):
    atomic_files.make_out_folder(tmp_path / "a" / "b" / "x.csv")
    assert (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize(("links", "ok"), [(atomic_files.MAX_SYMLINKS, True),
                                           (atomic_files.MAX_SYMLINKS + 1, False)])
def test_followed_takes_as_many_links_as_the_kernel_and_refuses_one_more(tmp_path, links, ok):
    (tmp_path / "f").write_bytes(b"x")
    for i in range(links):
        (tmp_path / f"l{i}").symlink_to("f" if i == 0 else f"l{i - 1}")
    last = tmp_path / f"l{links - 1}"
    if ok:
        assert last.read_bytes() == b"x" and atomic_files.followed(last) == tmp_path / "f"
        return
    for follow in (Path.read_bytes, atomic_files.followed):
        with pytest.raises(OSError) as err:
            follow(last)
        assert err.value.errno == errno.ELOOP


def _synced_folders(monkeypatch) -> list[int]:
    """The inode numbers of the folders os.fsync is called on."""
    synced, real = [], os.fsync

    def spying(fd):
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            synced.append(st.st_ino)
        return real(fd)

    monkeypatch.setattr(atomic_files.os, "fsync", spying)
    return synced


def test_a_replaced_file_and_a_replaced_pair_sync_their_folders(tmp_path, monkeypatch):
    """Without the folder's fsync a power cut after the rename can undo the rename: the old file is back."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    synced = _synced_folders(monkeypatch)
    replace_file(tmp_path / "state.json", b"{}")
    assert tmp_path.stat().st_ino in synced
    synced.clear()
    atomic_files.replace_pair(tmp_path / "a" / "m", b"1", tmp_path / "b" / "m.json", b"2", "a model")
    assert {(tmp_path / "a").stat().st_ino, (tmp_path / "b").stat().st_ino} <= set(synced)


def test_an_out_link_into_a_missing_folder_gets_that_folder(tmp_path):
    (tmp_path / "latest.csv").symlink_to("runs/3/p.csv")
    atomic_files.write_out_file(tmp_path / "latest.csv", b"x")
    assert (tmp_path / "runs" / "3" / "p.csv").read_bytes() == b"x" and (tmp_path / "latest.csv").is_symlink()


def _pipe_reader(fd: int) -> bytes:
    """All bytes that come out of the pipe read end ``fd`` (closed after)."""
    with os.fdopen(fd, "rb") as r:
        return r.read()


@pytest.mark.parametrize("how", ["fd link", "a user's link to it", "/dev/fd"])
def test_an_out_through_a_proc_fd_link_to_a_pipe_is_written_into_the_pipe(tmp_path, how):
    """``--out /dev/stdout | cat`` (and bash's ``>(cat > f)``): /proc/self/fd/N names ``pipe:[inode]``, which is
    no file name; resolved as one, the write failed with 'No such file or directory'."""
    r, w = os.pipe()
    try:
        path = {"fd link": Path(f"/proc/self/fd/{w}"), "/dev/fd": Path(f"/dev/fd/{w}"),
                "a user's link to it": tmp_path / "out.csv"}[how]
        if how == "a user's link to it":
            path.symlink_to(f"/proc/self/fd/{w}")
        assert atomic_files.followed(path).parent == Path(f"/proc/{os.getpid()}/fd")
        atomic_files.write_out_file(path, b"a,b\n1,2\n")
    finally:
        os.close(w)
    assert _pipe_reader(r) == b"a,b\n1,2\n"
    assert os.listdir(tmp_path) == (["out.csv"] if how == "a user's link to it" else [])


def test_an_out_through_a_proc_fd_link_to_a_deleted_file_is_written_into_it(tmp_path):
    """A link whose target is no longer a path ('/x (deleted)') names the open file itself: written into it,
    not resolved to a name that does not exist."""
    gone = tmp_path / "gone.csv"
    with open(gone, "w+b") as f:
        gone.unlink()
        atomic_files.write_out_file(f"/proc/self/fd/{f.fileno()}", b"rows\n")
        f.seek(0)
        assert f.read() == b"rows\n"
    assert os.listdir(tmp_path) == []


def test_a_proc_fd_link_to_a_file_still_resolves_to_the_file(tmp_path):
    """A link under /proc that names an existing file is followed as any link (``--out /dev/stdout > f.csv``
    replaces f.csv whole)."""
    target = tmp_path / "f.csv"
    with open(target, "wb") as f:
        assert atomic_files.followed(f"/proc/self/fd/{f.fileno()}") == target
