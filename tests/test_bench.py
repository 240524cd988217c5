"The benchmark harness of nbs/14_benchmarks: like-for-like reference, equal outputs, the JSON it writes. No timing thresholds."
import json, math, pytest, torch
from annotated_transformer.bench import (TorchReference, copy_to_reference, bench_config, random_batch, train_flops,
                                         bench_attention, set_fused, make_train_step, time_interleaved, main,
                                         peak_tflops, bench_mfu, bench_memory, BENCHMARKS)
from annotated_transformer.model import make_model, count_parameters
from annotated_transformer.attention import MultiHeadAttention


def _args(b): return b["src"], b["tgt_in"], b["src_key_padding_mask"], b["tgt_key_padding_mask"]


@pytest.mark.parametrize("preset", ["tiny", "multi30k", "base"])
def test_reference_has_our_parameter_count(preset):
    # both tie src/tgt embeddings and the generator (counted once); post-norm drops nn.Transformer's final norms
    cfg = bench_config(preset)
    ours, ref = make_model(cfg), TorchReference(cfg)
    assert count_parameters(ours) == count_parameters(ref)
    assert ref.generator.weight is ref.src_embed.lut.weight is ref.tgt_embed.lut.weight


def test_reference_untied_counts_generator_bias():
    cfg = bench_config("tiny"); cfg.tie_embeddings = False
    assert count_parameters(make_model(cfg)) == count_parameters(TorchReference(cfg))


@pytest.mark.parametrize("norm_first", [False, True])
def test_reference_computes_our_function(norm_first):
    torch.manual_seed(0)
    cfg = bench_config("tiny"); cfg.norm_first = norm_first
    ours, ref = make_model(cfg).eval(), TorchReference(cfg).eval()
    copy_to_reference(ours, ref)
    b = random_batch(cfg, 3, 9, 7, seed=1)
    keep = ~b["tgt_key_padding_mask"]
    with torch.no_grad():  # no_grad takes nn.Transformer's inference fast path
        torch.testing.assert_close(ours(*_args(b))[keep], ref(*_args(b))[keep], atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 autocast: the fast path is switched off and must still run
        assert ref(*_args(b)).shape == (3, 7, cfg.tgt_vocab_size)


def test_random_batch_padding():
    cfg = bench_config("tiny")
    b = random_batch(cfg, 5, 10, 8, min_frac=0.5)
    assert b["src"].shape == (5, 10) and b["tgt_in"].shape == b["tgt_out"].shape == (5, 8)
    assert (b["src"][b["src_key_padding_mask"]] == cfg.pad_idx).all()
    assert (b["tgt_out"][b["tgt_key_padding_mask"]] == cfg.pad_idx).all()
    assert (b["tgt_in"][:, 0] == cfg.bos_idx).all()
    assert not b["src_key_padding_mask"][0].any()  # the first row is the longest
    full = random_batch(cfg, 5, 10, min_frac=1.0)
    assert not full["src_key_padding_mask"].any() and not full["tgt_key_padding_mask"].any()


def test_fused_and_explicit_attention_agree():
    cfg = bench_config("tiny")
    b = random_batch(cfg, 4, 11)
    res = bench_attention(cfg, b, reps=1, warmup=0)
    assert res["max_abs_diff"] < 1e-4
    torch.manual_seed(0)
    m = set_fused(make_model(cfg), False)
    assert all(not x.fused for x in m.modules() if isinstance(x, MultiHeadAttention))


def test_train_step_changes_weights_and_harness_counts_reps():
    cfg = bench_config("tiny")
    torch.manual_seed(0); model = make_model(cfg)
    before = model.generator.weight.detach().clone()
    calls = []
    step = make_train_step(model, random_batch(cfg, 4, 6))
    t = time_interleaved({"a": lambda: (step(), calls.append("a")), "b": lambda: calls.append("b")}, reps=3, warmup=2)
    assert len(t["a"]) == len(t["b"]) == 3
    assert calls == ["a", "a", "b", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then the order alternates
    assert not torch.equal(before, model.generator.weight)


def test_train_flops_matches_six_n_for_linear_part():
    cfg = bench_config("base")
    D, F, V, N = cfg.d_model, cfg.d_ff, cfg.tgt_vocab_size, cfg.n_layers
    weights = N * (4 * D * D + 2 * D * F) + N * (8 * D * D + 2 * D * F) + D * V
    f = train_flops(cfg, 8, 20, 20, split=True)
    assert f["linear"] == 6 * weights * 8 * 20
    assert f["attention"] == 3 * N * (2 * 8 * 2 * 20 * 20 * D * 3)  # encoder self, decoder self, cross: 3 squares
    assert train_flops(cfg, 8, 20, 20) == f["linear"] + f["attention"]


def test_peak_table():
    assert peak_tflops("NVIDIA H200") == 989.0
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0  # the longest matching name wins
    assert peak_tflops("unknown card") is None and peak_tflops("unknown card", 50) == 50.0


def test_memory_in_fresh_processes():
    m = bench_memory(bench_config("tiny"), 4, 8)
    for k in ("ours", "torch"): assert m[k]["peak_mb"] > 50 and m[k]["growth_mb"] >= 0
    assert m["kind"] == "peak_rss"


def test_cli_writes_json(tmp_path):
    out = tmp_path / "b.json"
    res = main(["--presets", "tiny", "--reps", "1", "--benchmarks", "train,infer,attention,decode,seqlen,batching",
                "--seqlens", "8,16", "--scaling-tokens", "64", "--data-dir", str(tmp_path / "none"), "--out", str(out)])
    d = json.loads(out.read_text())
    assert d == json.loads(json.dumps(res))
    s = d["settings"]
    for k in ("torch", "threads", "device", "reps", "warmup", "presets"): assert k in s
    assert s["presets"]["tiny"]["batch_size"] == 8
    r = d["results"]["tiny"]
    assert set(r) == {"train", "infer", "attention", "decode", "seqlen", "batching"}
    for kind in ("train", "infer"):
        for prec in ("fp32", "bf16"):
            x = r[kind][prec]
            assert len(x["ours"]["times"]) == 1 and math.isclose(x["ratio"], x["ours"]["tok_per_s"] / x["torch"]["tok_per_s"])
    assert r["decode"]["beam_size"] == 4 and r["decode"]["speedup"] > 0
    assert [row["n"] for row in r["seqlen"]["rows"]] == [8, 16]
    assert r["batching"]["lengths"].startswith("seeded random")  # the data dir does not exist


def test_cli_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmarks"): main(["--presets", "tiny", "--benchmarks", "speed"])
    with pytest.raises(ValueError, match="expected one of"): main(["--presets", "huge"])
    with pytest.raises(SystemExit): main(["--presets", "tiny", "--seqlens", "a,b"])


def test_mfu_needs_cuda():
    with pytest.raises(ValueError, match="CUDA"): bench_mfu(bench_config("tiny"), device="cpu")


@pytest.mark.cuda
def test_mfu_on_cuda():
    res = bench_mfu(bench_config("tiny"), batch_size=8, src_len=16, reps=2, warmup=1, peak=100.0)
    assert res["tflops"] > 0 and res["mfu"] == pytest.approx(res["tflops"] / 100.0)


@pytest.mark.cuda
def test_memory_on_cuda():
    m = bench_memory(bench_config("tiny"), 4, 8, device="cuda")
    assert m["kind"] == "max_allocated" and m["ours"]["peak_mb"] > 0
