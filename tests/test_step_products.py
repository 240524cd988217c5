"tools/step_products.py: where a greedy step's time goes (33_bench_suite); its record, and bad arguments in one line."
import gzip, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import step_products as sp  # noqa: E402
from annotated_transformer.architecture.layers import can_pack  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"


@pytest.mark.parametrize("args, says", [(["--passes", "0"], "--passes: 0 is less than 1"),
                                        (["--out", "x.txt"], "--out: 'x.txt': expected a file name ending in .json"),
                                        (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "step_products.py"), *args], capture_output=True, text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout
    assert "Traceback" not in r.stderr


def test_an_empty_or_short_test_file_is_one_line(tmp_path):
    "Fewer than 32 sentences (an empty file, or --sentences 5): one line naming the file, exit 1, nothing written."
    (tmp_path / "multi30k").mkdir()
    with gzip.open(tmp_path / "multi30k" / "test_2016_flickr.de.gz", "wt") as f: f.write("")
    for args in (["--data-dir", str(tmp_path)], ["--sentences", "5"]):
        if "--sentences" in args and not TEST2016.is_file(): continue
        r = subprocess.run([sys.executable, str(REPO / "tools" / "step_products.py"), *args, "--out", "never.json"],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "at least 32 are needed" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (REPO / "results" / "bench" / "never.json").exists()


@pytest.mark.skipif(not can_pack(), reason="this PyTorch has no oneDNN packed linear kernel")
@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_the_record_times_the_step_s_products_and_steps(monkeypatch):
    "The 19 products of the shipped translator's step (6 a layer, the output projection), and the steps by rows left."
    got = {}
    monkeypatch.setattr(sp, "write", lambda res, name: got.update(res=res, name=name))
    threads = torch.get_num_threads()
    try: assert sp.main(["--sentences", "40", "--passes", "2", "--out", "t.json"]) == 0
    finally: torch.set_num_threads(threads)
    res, names = got["res"], [p[0] for p in sp.step_products(sp.load_model(sp.ROOT / "pretrained" / "multi30k-de-en",
                                                                           "at-translate").model)]
    assert got["name"] == "t.json" and len(names) == 19 and names[0] == "0.qkv" and names[-1] == "generator"
    p = res["products"]
    assert p["products"] == 19 and 0 < p["layers_in_turn_ms"] < p["in_turn_ms"] and p["hot_gflops"] > 0
    g = res["greedy"]
    assert g["sentences"] == 40 and g["steps"] == sum(b["steps"] for b in g["rows"].values()) > 0
