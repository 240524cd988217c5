"""tools/decode_precision.py: lower-precision products against fp32 (33_bench_suite); its record, and bad arguments
in one line."""
import gzip, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import decode_precision as dp  # noqa: E402
from annotated_transformer.architecture.layers import PackedLinear, can_pack  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"
needs_pack = pytest.mark.skipif(not can_pack(), reason="this PyTorch has no oneDNN packed linear kernel")
needs_bf16 = pytest.mark.skipif(not dp.bf16_packs(), reason="oneDNN has no bf16 products on this CPU (AVX2 alone)")


@pytest.mark.parametrize("args, says", [(["--passes", "0"], "--passes: 0 is less than 1"),
                                        (["--sentences", "-3"], "--sentences: -3 is less than 1"),
                                        (["--out", "x.txt"], "--out: 'x.txt': expected a file name ending in .json"),
                                        (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "decode_precision.py"), *args], capture_output=True,
                       text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout
    assert "Traceback" not in r.stderr


def test_an_empty_test_file_is_one_line(tmp_path):
    "No sentence, or sources and references of different lengths: one line naming the folder, exit 1, nothing written."
    (tmp_path / "multi30k").mkdir()
    for de, en in (("", ""), ("Ein Hund.\n", "")):
        for lang, text in (("de", de), ("en", en)):
            with gzip.open(tmp_path / "multi30k" / f"test_2016_flickr.{lang}.gz", "wt") as f: f.write(text)
        r = subprocess.run([sys.executable, str(REPO / "tools" / "decode_precision.py"), "--data-dir", str(tmp_path),
                            "--out", "never.json"], capture_output=True, text=True)
        assert r.returncode == 1 and "test2016 lines" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and str(tmp_path) in r.stderr
    assert not (REPO / "results" / "bench" / "never.json").exists()


@needs_bf16
def test_a_bf16_product_is_the_fp32_one_to_bf16_rounding():
    "Bf16Linear computes what its Linear does, to bf16's precision, ReLU and all; its weight is not the Linear's."
    torch.manual_seed(0)
    lin = PackedLinear(torch.nn.Linear(64, 48))
    b = dp.Bf16Linear(lin)
    x = torch.randn(5, 3, 64)
    with torch.no_grad():
        ref, got = lin(x), b(x)
        assert got.dtype == torch.float32 and got.shape == ref.shape
        assert not torch.equal(got, ref)  # bf16, not fp32 under another name
        torch.testing.assert_close(got, ref, rtol=0.02, atol=0.02)
        torch.testing.assert_close(b(x, relu=True), torch.relu(ref), rtol=0.02, atol=0.02)


@needs_bf16
def test_each_part_s_products_are_replaced():
    "The shipped translator: 18 encoder products, 30 decoder-layer products, the output projection; all 49."
    counts = {p: dp.bf16_products(dp.load_model(dp.ROOT / "pretrained" / "multi30k-de-en", "at-translate").model, p)
              for p in dp.PARTS}
    assert counts == {"encoder": 18, "decoder": 30, "generator": 1, "all": 49}


@needs_bf16
@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_the_record_compares_every_variant_with_fp32(monkeypatch):
    got = {}
    monkeypatch.setattr(dp, "write", lambda res, name: got.update(res=res, name=name))
    threads, usable = torch.get_num_threads(), dp.PackedDecoderStep.usable
    try: assert dp.main(["--sentences", "40", "--passes", "1", "--out", "t.json"]) == 0
    finally: torch.set_num_threads(threads)
    assert dp.PackedDecoderStep.usable is usable  # the kernel step is given back
    v = got["res"]["variants"]
    assert got["name"] == "t.json" and list(v) == ["fp32", "bf16-encoder", "bf16-decoder", "bf16-generator", "bf16-all",
                                                   "int8"]
    assert v["fp32"]["greedy"]["identical_to_fp32"] == v["fp32"]["beam"]["identical_to_fp32"] == 1.0
    assert v["bf16-all"]["bf16_products"] == 49 and v["int8"]["bf16_products"] == 0
    for rec in v.values():
        for s in ("greedy", "beam"):
            assert 0 <= rec[s]["identical_to_fp32"] <= 1 and rec[s]["seconds"] > 0 and rec[s]["bleu"] > 0


@pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")
def test_without_bf16_products_fp32_and_int8_still_run(monkeypatch, capsys):
    "Where oneDNN has no bf16 products (AVX2 alone): one line says so, and the record holds fp32 and int8."
    got = {}
    monkeypatch.setattr(dp, "write", lambda res, name: got.update(res=res))
    monkeypatch.setattr(dp, "bf16_packs", lambda: False)
    threads = torch.get_num_threads()
    try: assert dp.main(["--sentences", "40", "--passes", "1", "--out", "t.json"]) == 0
    finally: torch.set_num_threads(threads)
    assert list(got["res"]["variants"]) == ["fp32", "int8"] and got["res"]["bf16_left_out"] is True
    assert "no bf16 products" in capsys.readouterr().err
