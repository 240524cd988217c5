"tools/side_by_side.py: our search and CTranslate2's, one worker and two (33_bench_suite); its halves, its record, bad arguments."
import gzip, multiprocessing, subprocess, sys
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import side_by_side as sbs  # noqa: E402
from annotated_transformer.engine.loading import load_model  # noqa: E402
from annotated_transformer.translation.inference import encode_sources  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"
CKPT = REPO / "pretrained" / "multi30k-de-en"


@pytest.mark.parametrize("args, says", [(["--reps", "0"], "--reps: 0 is less than 1"),
                                        (["--out", "a/x.json"], "--out: 'a/x.json': expected a file name ending in .json"),
                                        (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "side_by_side.py"), *args], capture_output=True, text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout
    assert "Traceback" not in r.stderr


def test_too_few_sentences_for_two_processes_is_one_line(tmp_path):
    "Fewer than two batches (a file of 40 lines): one line naming the file, exit 1, nothing written."
    (tmp_path / "multi30k").mkdir()
    with gzip.open(tmp_path / "multi30k" / "test_2016_flickr.de.gz", "wt") as f: f.write("Ein Hund.\n" * 40)
    r = subprocess.run([sys.executable, str(REPO / "tools" / "side_by_side.py"), "--data-dir", str(tmp_path),
                        "--out", "never.json"], capture_output=True, text=True)
    assert r.returncode == 1 and "at least 64 are needed" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(tmp_path) in r.stderr
    assert not (REPO / "results" / "bench" / "never.json").exists()


@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_the_halves_are_translate_s_batches_taken_in_turn():
    "Every line once, blank lines in neither half, and each half made of whole batches of `translate`, every other one."
    _, lines = sbs.test2016(None, "de", 150)
    lines[3] = "   "  # a blank line: `translate` gives it "" without searching it
    tok = load_model(CKPT, "at-translate").tokenizer
    a, b = sbs.halves(tok, lines, 256)
    assert sorted(a + b) == [i for i in range(150) if i != 3]
    srcs = encode_sources(tok, lines, 256)
    order = sorted((i for i, s in enumerate(srcs) if s is not None), key=lambda i: -len(srcs[i]))
    batches = [order[s: s + sbs.ROWS] for s in range(0, len(order), sbs.ROWS)]
    assert a == batches[0] + batches[2] + batches[4] and b == batches[1] + batches[3]
    # searched by itself, a half forms the same batches again: its lines are already longest first
    ha = encode_sources(tok, [lines[i] for i in a], 256)
    again = sorted(range(len(a)), key=lambda i: -len(ha[i]))
    assert [a[i] for i in again] == a


@pytest.mark.slow
@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_the_record_has_every_decoder_and_the_same_translations(monkeypatch):
    "Six decoders for greedy and beam 4, ours the same translations every way, and the gains from their rates."
    pytest.importorskip("ctranslate2")
    got = {}
    monkeypatch.setattr(sbs, "write", lambda res, name: got.update(res=res, name=name))
    assert sbs.main(["--sentences", "70", "--reps", "1", "--out", "t.json"]) == 0
    res = got["res"]
    assert got["name"] == "t.json" and res["sentences"] == 70 and set(res["searches"]) == {"greedy", "beam"}
    for name, r in res["searches"].items():
        rate = r["sentences_per_s"]
        assert set(rate) == {"ours", "ours_workers", "ours_processes", "ours_pool_per_call", "ct2_float32",
                             "ct2_float32_workers"}
        assert r["identical_to_one_thread"] == {"ours_workers": 1.0, "ours_processes": 1.0, "ours_pool_per_call": 1.0}
        assert multiprocessing.active_children() == []  # the pools forked for each pass are gone
        assert r["ours_processes_gain"] == pytest.approx(rate["ours_processes"] / rate["ours"])
        assert r["ct2_gain"] == pytest.approx(rate["ct2_float32_workers"] / rate["ct2_float32"])
