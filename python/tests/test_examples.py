"""The Python examples run, each in one command, on loopback."""

import math
import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run(*args):
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_wordcount_counts_words_across_files(tmp_path):
    (tmp_path / "a.txt").write_text("the quick fox\nThe lazy dog")
    (tmp_path / "b.txt").write_text("the end, the fox")
    out = run(str(EXAMPLES / "wordcount.py"), str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--top", "2")
    lines = out.splitlines()
    assert lines[0] == "10 words, 6 distinct, in 2 files"
    assert lines[1].split() == ["4", "the"]
    assert lines[2].split() == ["2", "fox"]


def test_montecarlo_estimates_pi():
    out = run(str(EXAMPLES / "montecarlo.py"), "--tasks", "16", "--samples", "5000")
    estimate = float(out.split()[2])
    assert math.isclose(estimate, math.pi, abs_tol=0.1), out
    assert "from 16 tasks x 5000 samples" in out
