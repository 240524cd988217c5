"tools/decode_threads.py: what a second thread gives our decoding, by operator group (33); its record, bad arguments."
import gzip, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import decode_threads  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"
TOOL = str(REPO / "tools" / "decode_threads.py")


@pytest.mark.parametrize("args, says", [
    (["--reps", "0"], "--reps: 0 is less than 1"),
    (["--out", "a/x.json"], "--out: 'a/x.json': expected a file name ending in .json"),
    (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout and "Traceback" not in r.stderr


def test_too_few_sentences_is_one_line_and_no_file(tmp_path):
    (tmp_path / "multi30k").mkdir()
    with gzip.open(tmp_path / "multi30k" / "test_2016_flickr.de.gz", "wt") as f: f.write("Ein Hund.\n" * 20)
    r = subprocess.run([sys.executable, TOOL, "--data-dir", str(tmp_path), "--out", "never.json"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "at least 32 are needed" in r.stderr and str(tmp_path) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (REPO / "results" / "bench" / "never.json").exists()


def test_gains_are_one_thread_over_two_per_group():
    one = dict(groups_ms={"matmul": 8.0, "layer norm": 2.0, "other": 0.0}, total_ms=10.0)
    two = dict(groups_ms={"matmul": 4.0, "layer norm": 2.5, "other": 0.0}, total_ms=6.5)
    g = decode_threads.gains(one, two)
    assert g["groups"] == {"matmul": 2.0, "layer norm": 0.8, "other": None}
    assert g["total"] == pytest.approx(10 / 6.5)


@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_each_pass_runs_at_its_thread_count_and_the_record_adds_up(monkeypatch):
    """The passes alternate one thread and two, timed then profiled; each thread count's groups sum to its total and its
    calls to the operators' calls; the gains are one thread's over two threads'; torch's thread count is back."""
    seen, real = [], decode_threads.one_pass
    def one_pass(tr, lines, beam):
        seen.append((torch.get_num_threads(), len(lines))); return real(tr, lines, beam)
    monkeypatch.setattr(decode_threads, "one_pass", one_pass)
    got, threads = {}, torch.get_num_threads()
    monkeypatch.setattr(decode_threads, "write", lambda res, name: got.update(res=res, name=name))
    torch.set_num_threads(1)  # not the last count the passes set, so that one left behind shows
    try:
        assert decode_threads.main(["--sentences", "32", "--reps", "2", "--out", "t.json"]) == 0
        assert torch.get_num_threads() == 1
    finally: torch.set_num_threads(threads)
    # per search: a warm-up at 1 and 2 threads, then per rep a timed and a profiled pass at 1, then the same at 2
    one_search = [(1, 32), (2, 32)] + [(1, 32), (1, 32), (2, 32), (2, 32)] * 2
    assert seen == one_search * 2
    res = got["res"]
    assert got["name"] == "t.json" and res["sentences"] == 32 and set(res["searches"]) == {"greedy", "beam4"}
    for r in res["searches"].values():
        assert r["identical"] == 1.0 and set(r["threads"]) == {"1", "2"}
        for t in r["threads"].values():
            p = t["profile"]
            assert len(t["wall_s"]) == 2 and t["sentences_per_s"] == pytest.approx(32 / t["median_s"])
            assert sum(p["groups_ms"].values()) == pytest.approx(p["total_ms"])
            assert sum(p["groups_calls"].values()) == pytest.approx(p["calls"])
            assert p["groups_ms"]["matmul"] > 0 and p["groups_calls"]["matmul"] > 0  # the packed products
        p1, p2 = r["threads"]["1"]["profile"], r["threads"]["2"]["profile"]
        mat = r["profile_gain"]["groups"]["matmul"]
        assert mat == pytest.approx(p1["groups_ms"]["matmul"] / p2["groups_ms"]["matmul"])
        rate = {n: t["sentences_per_s"] for n, t in r["threads"].items()}
        assert r["wall_gain"] == pytest.approx(rate["2"] / rate["1"])
