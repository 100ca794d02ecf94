"""``jetpredict serve`` with a data directory that is a file or cannot be created: exit 2, naming the flag
(or the variable) that gave it and the reason, before anything is set up."""

from __future__ import annotations

from jetpredict.cli import main


def test_a_file_given_as_data_dir_is_refused_by_its_flag(tmp_path, clean_env, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    assert main(["serve", "--data-dir", str(afile), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--data-dir {afile} is not a directory" in err and "Errno" not in err
    assert afile.read_text() == "not a folder"


def test_a_data_dir_that_cannot_be_created_says_why(tmp_path, clean_env, capsys):
    parent = tmp_path / "afile"
    parent.write_text("")
    assert main(["serve", "--data-dir", str(parent / "sub"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--data-dir {parent / 'sub'} cannot be created: " in err and "Not a directory" in err


def test_the_variable_is_named_when_it_gave_the_folder(tmp_path, clean_env, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    clean_env.setenv("JETPREDICT_DATA_DIR", str(afile))
    assert main(["serve", "--port", "0"]) == 2
    assert f"JETPREDICT_DATA_DIR {afile} is not a directory" in capsys.readouterr().err


def test_the_default_folder_is_named_as_the_default(tmp_path, clean_env, capsys):
    (tmp_path / "data").write_text("")
    clean_env.chdir(tmp_path)
    assert main(["serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"the default data directory (set --data-dir or JETPREDICT_DATA_DIR) {tmp_path / 'data'} is not a directory" in err
