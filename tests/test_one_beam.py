"tools/one_beam.py: greedy decoding by one_beam_search and by the general loop, in one process (35, 33); its record, bad arguments."
import gzip, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import one_beam  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402
from annotated_transformer.training.decode import beam_search  # noqa: E402
from annotated_transformer.translation import inference  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"


@pytest.mark.parametrize("args, says", [(["--reps", "0"], "--reps: 0 is less than 1"),
                                        (["--out", "a/x.json"], "--out: 'a/x.json': expected a file name ending in .json"),
                                        (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "one_beam.py"), *args], capture_output=True, text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout and "Traceback" not in r.stderr


def test_too_few_sentences_for_two_workers_is_one_line(tmp_path):
    (tmp_path / "multi30k").mkdir()
    with gzip.open(tmp_path / "multi30k" / "test_2016_flickr.de.gz", "wt") as f: f.write("Ein Hund.\n" * 40)
    r = subprocess.run([sys.executable, str(REPO / "tools" / "one_beam.py"), "--data-dir", str(tmp_path),
                        "--out", "never.json"], capture_output=True, text=True)
    assert r.returncode == 1 and "at least 64 are needed" in r.stderr and str(tmp_path) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (REPO / "results" / "bench" / "never.json").exists()


@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_each_pass_runs_the_search_it_names_and_the_record_holds_both(monkeypatch):
    """The passes alternate one_beam_search and the general loop, one worker and two, with the same translations; the
    served search and torch's thread count are back afterwards."""
    import annotated_transformer.training.decode as decode
    calls, real = [], decode.one_beam_search
    monkeypatch.setattr(decode, "one_beam_search", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    tr = one_beam.load_model(REPO / "pretrained" / "multi30k-de-en", "at-translate")
    _, lines = one_beam.test2016(None, "de", 64)
    for name, uses in (("one_beam", True), ("loop", False)):
        calls.clear(); one_beam.timed(tr, lines, 2, one_beam.SEARCHES[name])
        assert bool(calls) == uses, name
    assert inference.beam_search is beam_search
    got, threads = {}, torch.get_num_threads()
    monkeypatch.setattr(one_beam, "write", lambda res, name: got.update(res=res, name=name))
    assert one_beam.main(["--sentences", "64", "--reps", "1", "--out", "t.json"]) == 0
    res = got["res"]
    assert got["name"] == "t.json" and res["sentences"] == 64 and set(res["workers"]) == {"1", "2"}
    for r in res["workers"].values():
        assert r["identical"] == 1.0 and set(r["sentences_per_s"]) == {"one_beam", "loop"}
        assert r["one_beam_over_loop"] == pytest.approx(r["sentences_per_s"]["one_beam"] / r["sentences_per_s"]["loop"])
    assert inference.beam_search is beam_search and torch.get_num_threads() == threads
