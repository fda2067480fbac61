"""Atomic checkpoint directories: a failing or killed writer never leaves a half-written checkpoint."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ragen_rllib.algorithms.ragen.driver.checkpoint_io import write_atomically


def writer(content):
    def write(tmp):
        with open(os.path.join(tmp, "state.pkl"), "w") as f:
            f.write(content)
    return write


def test_a_new_an_empty_and_an_existing_directory_are_replaced_whole(tmp_path):
    target = tmp_path / "ckpt"
    write_atomically(target, writer("one"))
    assert (target / "state.pkl").read_text() == "one"
    write_atomically(target, writer("two"))  # non-empty: swapped, the old one deleted
    assert (target / "state.pkl").read_text() == "two"
    empty = tmp_path / "tune_dir"
    empty.mkdir()
    write_atomically(empty, writer("three"))
    assert (empty / "state.pkl").read_text() == "three"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "tune_dir"]  # no partial or old dirs left


def test_a_failing_writer_leaves_the_previous_checkpoint(tmp_path):
    target = tmp_path / "ckpt"
    write_atomically(target, writer("good"))

    def broken(tmp):
        writer("half")(tmp)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, broken)
    assert (target / "state.pkl").read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_a_process_killed_mid_write_leaves_the_previous_checkpoint(tmp_path):
    target = tmp_path / "ckpt"
    write_atomically(target, writer("good"))
    script = textwrap.dedent(f"""
        import os, signal
        from ragen_rllib.algorithms.ragen.driver.checkpoint_io import write_atomically
        def write(tmp):
            with open(os.path.join(tmp, "state.pkl"), "w") as f:
                f.write("trunc")
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        write_atomically({str(target)!r}, write)
    """)
    proc = subprocess.run([sys.executable, "-c", script])
    assert proc.returncode == -signal.SIGKILL
    assert (target / "state.pkl").read_text() == "good"
