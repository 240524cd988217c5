"The benchmark harness of nbs/32_benchmarks and the suite of nbs/33_bench_suite: like-for-like reference, equal outputs, the JSON it writes. No timing thresholds."
import json, math, pytest, torch
from annotated_transformer.bench.benchmarks import (TorchReference, copy_to_reference, bench_config, random_padded_batch, train_flops,
    bench_attention, set_fused, make_train_step, time_interleaved, time_blocks, matmul_tflops, peak_tflops, bench_decode,
    BENCH_PRESETS)
from annotated_transformer.bench.fast_path import bench_compile, bench_loss, bench_adam, bench_mfu, VARIANTS, readable_chart, chart_span_loss, chart_step_speed
from annotated_transformer.bench.scaling import bench_memory
from annotated_transformer.bench.bench_suite import BENCHMARKS, cpu_record, ratio_rows, DEFAULT_BENCHMARKS
from annotated_transformer.engine.runs import cpu_id, hardware
from annotated_transformer.commands.experiments import bench_main
from annotated_transformer.training.decode import greedy_decode, beam_search
from annotated_transformer.architecture.attention import padding_mask
import subprocess, sys
from pathlib import Path
from annotated_transformer.architecture.model import make_model, count_parameters
from annotated_transformer.architecture.attention import MultiHeadAttention


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
    b = random_padded_batch(cfg, 3, 9, 7, seed=1)
    keep = ~b["tgt_key_padding_mask"]
    with torch.no_grad():  # no_grad takes nn.Transformer's inference fast path
        torch.testing.assert_close(ours(*_args(b))[keep], ref(*_args(b))[keep], atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 autocast: the fast path is switched off and must still run
        assert ref(*_args(b)).shape == (3, 7, cfg.tgt_vocab_size)


def test_random_padded_batch():
    cfg = bench_config("tiny")
    b = random_padded_batch(cfg, 5, 10, 8, min_frac=0.5)
    assert b["src"].shape == (5, 10) and b["tgt_in"].shape == b["tgt_out"].shape == (5, 8)
    assert (b["src"][b["src_key_padding_mask"]] == cfg.pad_idx).all()
    assert (b["tgt_out"][b["tgt_key_padding_mask"]] == cfg.pad_idx).all()
    assert (b["tgt_in"][:, 0] == cfg.bos_idx).all()
    assert not b["src_key_padding_mask"][0].any()  # the first row is the longest
    full = random_padded_batch(cfg, 5, 10, min_frac=1.0)
    assert not full["src_key_padding_mask"].any() and not full["tgt_key_padding_mask"].any()


def test_fused_and_explicit_attention_agree():
    cfg = bench_config("tiny")
    b = random_padded_batch(cfg, 4, 11)
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
    step = make_train_step(model, random_padded_batch(cfg, 4, 6))
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
    "Peak memory of ours, ours on the fast path and torch.nn, each in a fresh process, per token and as ratios"
    m = bench_memory(bench_config("tiny"), 4, 8)
    for k in ("ours", "torch"): assert m[k]["peak_mb"] > 50 and m[k]["growth_mb"] >= 0
    assert m["kind"] == "peak_rss"
    assert set(("ours", "ours_fast", "torch")) <= set(m) and m["tokens"] > 0
    for k in ("ours", "ours_fast", "torch"): assert m[k]["mb_per_token"] == pytest.approx(m[k]["peak_mb"] / m["tokens"])
    assert m["fast_ratio"] == pytest.approx(m["ours_fast"]["peak_mb"] / m["torch"]["peak_mb"])


def test_cli_writes_json(tmp_path):
    out = tmp_path / "b.json"
    assert bench_main(["--presets", "tiny", "--reps", "1", "--benchmarks", "train,infer,attention,decode,seqlen,batching",
                       "--seqlens", "8,16", "--scaling-tokens", "64", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["command"] == ("at-bench --presets tiny --reps 1 --benchmarks train,infer,attention,decode,seqlen,batching "
                            f"--seqlens 8,16 --scaling-tokens 64 --data-dir {tmp_path} --out {out}")  # how it was made
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
    assert r["batching"]["lengths"].startswith("seeded random")  # the data dir holds no multi30k/


@pytest.mark.parametrize("args,message", [
    (["--benchmarks", "speed"], "unknown benchmarks"), (["--presets", "huge"], "expected one of"),
    (["--seqlens", "a,b"], "expected comma-separated integers"), (["--reps", "0"], "expected at least 1, got '0'"),
    (["--reps", "-3"], "expected at least 1, got '-3'"), (["--reps", "NaN"], "expected an integer, got 'NaN'"),
    (["--warmup", "-1"], "expected at least 0"), (["--peak-tflops", "nan"], "expected a finite number"),
    (["--peak-tflops", "0"], "expected a positive number"), (["--peak-tflops", "-1"], "expected a positive number, got '-1'"),
    (["--decode-batches", "0,64"], "positive integers"),
    (["--device", "tpu9"], "expected cpu, cuda or cuda:N"),  # a missing --checkpoint is a bad file (exit 1): see below
    (["--benchmarks", "train,ct2"], "give its checkpoint (--checkpoint)"), (["--compile-threads", "0,2"], "positive integers"),
    (["--compile-threads", "2,2"], "distinct")])
def test_cli_rejects_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as e: bench_main(["--presets", "tiny", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("at-bench: error:")  # one line names the problem


def test_cli_reads_the_checkpoint_before_any_benchmark(tmp_path, capsys):
    """A missing, damaged or non-translation --checkpoint is one line at once, before minutes of other benchmarks, and exit 1
    (a bad file, as in every command; it was 2, the code of a bad option); no JSON is written."""
    from annotated_transformer.engine.checkpoint import save_checkpoint, make_checkpoint
    from annotated_transformer.architecture.model import make_model
    from annotated_transformer.engine.config import TransformerConfig
    empty = tmp_path / "empty.pt"; empty.write_bytes(b"")
    ids_run = tmp_path / "copy-run"  # a checkpoint of this package, of a model that reads token ids, not text
    save_checkpoint(make_checkpoint(make_model(TransformerConfig.tiny(n_layers=1)), step=1), ids_run, 1)
    out = tmp_path / "b.json"
    for ck, message in [(empty, "not a readable checkpoint"), (tmp_path / "no-ckpt", "no checkpoint in this directory"),
                        (ids_run, "holds a transformer model (token ids), which at-bench --benchmarks ct2 does not serve; no command reads text for it: it holds no tokenizer"),
                        (tmp_path / "missing.pt", "no such file or directory")]:
        if ck.name == "no-ckpt": ck.mkdir()
        try: rc = bench_main(["--presets", "tiny", "--checkpoint", str(ck), "--out", str(out)])
        except SystemExit as e: rc = e.code
        err = capsys.readouterr().err
        assert rc == 1 and message in err and f"--checkpoint {ck}" in err, (rc, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not out.exists()


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



@pytest.mark.slow  # two fresh interpreters; the quick set has the in-process run and bad_input's console-script row
def test_console_script_exits_0_and_prints_on_stdout(tmp_path):
    "The `at-bench` entry point (sys.exit(bench_main())) exits 0 and prints its table on stdout, not a dict on stderr."
    out = tmp_path / "b.json"
    code = "import sys; from annotated_transformer.commands.experiments import bench_main; sys.exit(bench_main())"
    repo = str(Path(__file__).resolve().parents[1])
    p = subprocess.run([sys.executable, "-c", code, "--presets", "tiny", "--reps", "1", "--benchmarks", "train,adam",
                        "--out", str(out)], capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": repo})
    assert p.returncode == 0, p.stderr
    assert "train fp32 tokens/s" in p.stdout and f"wrote {out}" in p.stdout
    assert "{'settings'" not in p.stderr and out.is_file()
    p = subprocess.run([sys.executable, "-c", code, "--reps", "0"], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": repo})
    assert p.returncode == 2 and "--reps" in p.stderr and "Traceback" not in p.stderr


def test_default_benchmarks_leave_compile_to_the_flag():
    assert "compile" in BENCHMARKS and "compile" not in DEFAULT_BENCHMARKS
    assert "ct2" in BENCHMARKS and "ct2" not in DEFAULT_BENCHMARKS  # it needs a trained model: `--checkpoint` adds it
    assert "profile" in BENCHMARKS and "profile" not in DEFAULT_BENCHMARKS  # run when --benchmarks names it


def test_profile_groups_add_up_and_reach_the_report():
    "The profile of both models' training step: every operator's self time lands in exactly one group, and the report shows each group."
    from annotated_transformer.bench.bench_suite import run_benchmarks
    from annotated_transformer.bench.op_profile import OP_GROUPS
    res = run_benchmarks(presets=("tiny",), benchmarks=("profile",), reps=1, warmup=1, precisions=("fp32",), log=lambda *a: None)
    pr = res["results"]["tiny"]["profile"]["fp32"]
    for k in ("ours", "torch"):
        assert sum(pr[k]["groups_ms"].values()) == pytest.approx(pr[k]["total_ms"])
        assert pr[k]["groups_ms"]["matmul"] > 0 and pr[k]["groups_ms"]["optimizer"] > 0 and pr[k]["groups_ms"]["layer norm"] > 0
        assert all(o["ms"] > 0 for o in pr[k]["top"])
    assert pr["ours_minus_torch_ms"]["matmul"] == pytest.approx(pr["ours"]["groups_ms"]["matmul"] - pr["torch"]["groups_ms"]["matmul"])
    rows = [r for r in ratio_rows(res) if r["what"].startswith("profile fp32")]
    assert len(rows) == len(OP_GROUPS) + 1  # each group and "other"


@pytest.mark.parametrize("which", ["ours", "torch"])
def test_train_step_recipes_give_the_same_update(which):
    "The chunked loss and fused/foreach Adam change no number: one step of each recipe gives the same weights."
    cfg = bench_config("tiny"); cfg.dropout = 0.0
    b = random_padded_batch(cfg, 4, 7)
    out = []
    for recipe in (dict(), dict(loss="chunked"), dict(loss="chunked", adam="foreach"), dict(loss="chunked", adam="fused")):
        torch.manual_seed(0); model = make_model(cfg) if which == "ours" else TorchReference(cfg)
        make_train_step(model, b, lr=1e-3, eps=1e-3, **recipe)()  # eps: Adam's first update is ~lr * sign(g) with 1e-9
        out.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    for o in out[1:]: torch.testing.assert_close(o, out[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="loss='fused'"): make_train_step(model, b, loss="fused")


def test_loss_and_adam_benchmarks():
    cfg = bench_config("tiny"); b = random_padded_batch(cfg, 4, 7)
    l = bench_loss(cfg, b, reps=1, warmup=0)
    assert l["ratio"] == pytest.approx(l["readable_step_s"] / l["chunked_step_s"])
    a = bench_adam(cfg, reps=1, warmup=0)
    assert set(a["step_s"]) == {"readable", "foreach", "fused"} and a["n_tensors"] > 10


def test_static_cache_decodes_the_same_hypotheses():
    "The decode rewrite (StaticKVCache) against the readable cache: greedy and beam search, padded sources."
    for norm_first in (False, True):
        cfg = bench_config("tiny"); cfg.norm_first = norm_first; cfg.dropout = 0.0
        torch.manual_seed(1); model = make_model(cfg).eval()
        src = torch.randint(3, cfg.src_vocab_size, (7, 10)); src[:, -1] = 2; src[::3, 6:] = 0; src[::3, 5] = 2
        kpm = padding_mask(src, 0)
        assert torch.equal(greedy_decode(model, src, kpm, max_len_b=8, static_cache=True), greedy_decode(model, src, kpm, max_len_b=8))
        a = beam_search(model, src, kpm, beam_size=4, n_best=4, max_len_b=8)
        b = beam_search(model, src, kpm, beam_size=4, n_best=4, max_len_b=8, static_cache=True)
        assert [[h.tokens for h in x] for x in a] == [[h.tokens for h in x] for x in b]
        for x, y in zip(a, b):
            for h, g in zip(x, y): assert h.score == pytest.approx(g.score, abs=1e-5)
    r = bench_decode(cfg, src_len=6, n_sentences=3, reps=1)
    assert r["same_hypotheses"] and r["static_vs_cache"] == pytest.approx(r["static_cache_sent_per_s"] / r["cache_sent_per_s"])


def test_cpu_flags_and_matmul_peak():
    f = cpu_record()
    assert "model" in f and all(isinstance(f[k], bool) for k in ("amx_bf16", "avx512_bf16"))
    assert "id" in f and f["id"] == cpu_id()  # the family numbers beside the name, None where the CPU reports none
    assert matmul_tflops(n=128, reps=1) > 0


@pytest.mark.slow
def test_compile_benchmark_rows():
    "All six variants (eager/compiled, ours/nn.Transformer, ours' fast path compiled and eager) run and the ratios are their quotients."
    cfg = bench_config("tiny"); b = random_padded_batch(cfg, 4, 6)
    r = bench_compile(cfg, b, reps=1, warmup=1, peak=1.0)
    tok = {k: r[k]["tok_per_s"] for k in VARIANTS}
    assert r["compiled_ratio"] == pytest.approx(tok["ours_compiled"] / tok["torch_compiled"])
    assert r["fast_ratio"] == pytest.approx(tok["ours_fast"] / tok["torch_compiled"])
    assert r["fast_eager_ratio"] == pytest.approx(tok["ours_fast_eager"] / tok["torch_eager"])
    assert r["ours_eager"]["mfu"] == pytest.approx(r["ours_eager"]["tflops"])
    # the chunked loss skips padding rows: their generator products (3 x 2 D V each) leave the computed count
    pad_rows = int(b["tgt_key_padding_mask"].sum()); assert pad_rows > 0
    for k, (_, kw) in VARIANTS.items():
        less = 6 * pad_rows * cfg.d_model * cfg.tgt_vocab_size if kw.get("loss") == "chunked" else 0
        assert r[k]["computed_flops"] == r["flops"] - less
        assert r[k]["computed_mfu"] == pytest.approx(r[k]["computed_flops"] / r[k]["step_s"] / 1e12)
    assert r["ours_fast_eager"]["computed_mfu"] < r["ours_fast_eager"]["mfu"]
    assert r["threads"] == torch.get_num_threads() and set(r["ours_fast"]) >= {"payback_steps", "first_call_s"}
    rows = ratio_rows(dict(results=dict(tiny=dict(compile={"fp32, 1 thread": r}))))  # run_benchmarks: one result per setting
    assert any(x["what"] == "train fp32, 1 thread tokens/s, both compiled" and x["ratio"] == r["compiled_ratio"] for x in rows)
    assert any(x["what"] == "train fp32, 1 thread tokens/s, ours fast path eager vs nn.T. eager" and x["ratio"] == r["fast_eager_ratio"] for x in rows)
    assert any(x["what"] == "train TFLOP/s fp32, 1 thread, utilization: ours_fast_eager" for x in rows)


@pytest.mark.cuda
def test_compile_benchmark_on_cuda():
    cfg = bench_config("tiny"); b = random_padded_batch(cfg, 8, 16, device="cuda")
    r = bench_compile(cfg, b, "bf16", reps=2, warmup=1, device="cuda", peak=100.0)
    assert r["ours_fast"]["mfu"] > 0


def test_payback_steps():
    from annotated_transformer.engine.precision import payback_steps
    assert payback_steps(first_call_s=31.0, step_s=1.0, eager_step_s=2.0) == 30.0  # 30 s of compiling, 1 s saved per step
    assert payback_steps(5.0, 2.0, 2.0) is None and payback_steps(5.0, 3.0, 2.0) is None  # no gain: it never pays back


@pytest.mark.parametrize("flags,native", [(set(), False), ({"avx2", "avx512_bf16"}, True), ({"amx_bf16"}, True)])
def test_compile_plan_runs_bf16_only_where_native(monkeypatch, flags, native):
    import annotated_transformer.bench.fast_path as fast_path
    monkeypatch.setattr(fast_path, "cpu_flags", lambda: flags)
    monkeypatch.setattr(fast_path, "matmul_tflops", lambda device, dtype: 0.2 if dtype == torch.bfloat16 else 0.1)  # nothing is timed
    plan = fast_path.compile_plan("cpu", ("fp32", "bf16"), threads=(1, 2))
    expect = [("fp32", 1)] + [("bf16", 1)] * native + [("fp32", 2)] + [("bf16", 2)] * native
    assert [(c["precision"], c["threads"]) for c in plan.values()] == expect
    assert [c["tflops"] for c in plan.values()] == [0.2 if p == "bf16" else 0.1 for p, _ in expect]


def test_compile_plan_takes_a_given_peak_for_one_setting_only(monkeypatch):
    import annotated_transformer.bench.fast_path as fast_path
    monkeypatch.setattr(fast_path, "cpu_flags", lambda: {"avx512_bf16"})
    plan = fast_path.compile_plan("cpu", ("bf16",), threads=(2,), peak=0.5)
    assert [(c["precision"], c["threads"], c["tflops"], c["kind"]) for c in plan.values()] == [("bf16", 2, 0.5, "given")]
    for precisions, threads in ((("fp32", "bf16"), (2,)), (("fp32",), (1, 2))):  # one number cannot be both rates
        with pytest.raises(ValueError, match="peak=0.5: one given peak for 2 settings"):
            fast_path.compile_plan("cpu", precisions, threads=threads, peak=0.5)
    monkeypatch.setattr(fast_path, "cpu_flags", lambda: set())  # bf16 is not run without native bf16: one setting is left
    assert list(fast_path.compile_plan("cpu", ("fp32", "bf16"), threads=(1,), peak=0.5)) == ["fp32, 1 thread"]


def test_compile_plan_measures_each_peak_at_its_thread_count(monkeypatch):
    import annotated_transformer.bench.fast_path as fast_path
    seen = []
    monkeypatch.setattr(fast_path, "cpu_flags", lambda: set())
    monkeypatch.setattr(fast_path, "matmul_tflops", lambda device, dtype: seen.append((torch.get_num_threads(), dtype)) or 0.1)
    before = torch.get_num_threads()
    plan = fast_path.compile_plan("cpu", ("fp32",), threads=(1, 2))
    assert seen == [(1, torch.float32), (2, torch.float32)] and torch.get_num_threads() == before
    assert list(plan) == ["fp32, 1 thread", "fp32, 2 threads"] and "measured fp32" in plan["fp32, 2 threads"]["kind"]


def test_bench_presets_are_one_list_in_the_help_and_the_errors(capsys):
    "at-bench --presets: its help and bench_plan's error name every preset bench_config accepts (the README runs task models too)."
    from annotated_transformer.bench.bench_suite import bench_plan
    with pytest.raises(SystemExit): bench_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(p in help_text for p in BENCH_PRESETS), help_text
    with pytest.raises(ValueError) as e: bench_plan(",")
    assert all(p in str(e.value) for p in BENCH_PRESETS)
    for p in BENCH_PRESETS: assert bench_config(p).d_model > 0


def test_time_blocks_times_whole_blocks_in_turn():
    calls = []
    blocks = time_blocks({"a": lambda b: calls.append(("a", b)), "b": lambda b: calls.append(("b", b))}, [0, 1, 2], warm=1, rounds=3)
    assert calls == [(k, b) for _ in range(3) for k in "ab" for b in (0, 1, 2)]  # every batch of a block before the next function
    assert [len(v) for v in blocks.values()] == [3, 3] and all(t >= 0 for v in blocks.values() for t in v)
    with pytest.raises(ValueError, match="warm=2: expected 0 <= warm < 2 batches"): time_blocks({"a": print}, [0, 1], warm=2)
    with pytest.raises(ValueError, match="rounds=0"): time_blocks({"a": print}, [0, 1], rounds=0)


@pytest.fixture
def toy_chart():
    "A tiny chart parser's vocabulary, config (span loss) and one batch of two gold trees."
    from annotated_transformer.parsing.trees import parse_tree
    from annotated_transformer.parsing.chart import ChartConfig
    from annotated_transformer.parsing.chart_vocab import ChartVocab, chart_batch
    trees = [parse_tree("(TOP (S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)))"),
             parse_tree("(TOP (S (NP (NNS Prices)) (VP (VBD rose) (ADVP (RB sharply))) (. .)))")]
    vocab = ChartVocab.from_trees(trees, min_count=1)
    cfg = vocab.sized(ChartConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, d_char=8, d_label=16, dropout=0.3, loss="span"))
    return vocab, cfg, chart_batch(vocab, [t.words() for t in trees], trees)


def test_readable_chart_is_the_same_parser_with_nn_dropout(toy_chart):
    from annotated_transformer.parsing.chart import ChartParser, ChartObjective
    from annotated_transformer.architecture.attention import Dropout
    vocab, cfg, b = toy_chart
    torch.manual_seed(0); fast = ChartParser(cfg)
    readable = readable_chart(fast)
    ours = [m for m in fast.modules() if isinstance(m, Dropout)]
    theirs = [m for m in readable.modules() if isinstance(m, torch.nn.Dropout)]
    assert ours and not any(isinstance(m, Dropout) for m in readable.modules()) and [m.p for m in theirs] == [m.p for m in ours]
    assert all(isinstance(m, Dropout) for m in ours)  # the original keeps its own
    fast.eval()
    readable = readable_chart(fast)  # a copy of a model in eval mode is in eval mode, its new nn.Dropout too
    assert not any(m.training for m in readable.modules())
    want = ChartObjective(vocab, "span").loss(fast, b)
    assert torch.allclose(chart_span_loss(readable, b), want, atol=1e-5) and want > 0


def test_chart_step_speed_times_both_steps_over_the_same_batches(toy_chart):
    from annotated_transformer.engine.tasks import TaskData
    vocab, cfg, b = toy_chart
    data = TaskData(train=[b] * 4, valid=None, tokenizer=vocab, model_config=cfg)
    r = chart_step_speed(data, steps=3, warm=1, rounds=2)
    assert [len(v) for v in r["blocks"].values()] == [2, 2] and set(r["blocks"]) == {"readable", "fast"}
    assert r["seconds_per_step"] == {k: min(v) for k, v in r["blocks"].items()}
    assert r["ratio_readable_over_fast"] == r["seconds_per_step"]["readable"] / r["seconds_per_step"]["fast"]
    assert r["words"] == 3 * 10 and (r["steps"], r["warm_steps"], r["rounds"]) == (3, 1, 2)
    with pytest.raises(ValueError, match="steps=4, warm=1: the training data has 4 batches"): chart_step_speed(data, steps=4, warm=1)
    from dataclasses import replace
    with pytest.raises(ValueError, match="loss='margin'"): chart_step_speed(replace(data, model_config=replace(cfg, loss="margin")))



def test_cpu_id_tells_apart_cpus_of_one_name():
    "Two EPYCs report the same model name; the family, model and stepping numbers tell them apart."
    zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n"
    zen5 = zen4.replace("25", "26").replace(": 17", ": 2")
    assert cpu_id(zen4) == "family 25 model 17 stepping 1" and cpu_id(zen5) == "family 26 model 2 stepping 1"
    assert cpu_id("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n") is None  # an ARM CPU: no family numbers
    assert hardware()["cpu_id"] == cpu_id()

def test_cpu_label_names_the_family_where_recorded():
    from annotated_transformer.bench.bench_suite import cpu_label
    old = dict(cpu=dict(model="AMD EPYC", amx_bf16=False, avx512_bf16=True, avx2=True))  # a run from before ids
    new = dict(cpu=dict(old["cpu"], id="family 25 model 17 stepping 1"))
    assert cpu_label(old) == "AMD EPYC (avx512_bf16)" and cpu_label(new) == "AMD EPYC family 25 model 17 (avx512_bf16)"

def test_cpu_label_tells_a_cpu_held_to_avx2():
    from annotated_transformer.bench.bench_suite import cpu_label, settings
    assert settings()["isa"] == torch.backends.cpu.get_cpu_capability()  # the record names the kernels ATen used
    cpu = dict(model="AMD EPYC", id="family 25 model 17 stepping 1", avx512_bf16=True, avx512f=True, avx2=True)
    held = dict(ATEN_CPU_CAPABILITY="avx2")
    assert cpu_label(dict(cpu=cpu, isa="AVX512", env={})) == "AMD EPYC family 25 model 17 (avx512_bf16)"
    assert cpu_label(dict(cpu=cpu, isa="AVX2", env=held)) == "AMD EPYC family 25 model 17 (held to AVX2, no native bf16)"
    # ATen on AVX2 by its own choice, or a record from before `isa`: not held
    assert cpu_label(dict(cpu=cpu, isa="AVX2", env={})) == cpu_label(dict(cpu=cpu)) == cpu_label(dict(cpu=cpu, isa="AVX512", env={}))
    avx2 = dict(model="AMD EPYC", avx512_bf16=False, avx512f=False, avx2=True)  # a CPU that has no more than AVX2
    assert cpu_label(dict(cpu=avx2, isa="AVX2", env=held)) == "AMD EPYC (AVX2 only, no native bf16)"

def test_cpu_first_seen_orders_cpus_by_their_first_run():
    from annotated_transformer.bench.bench_suite import cpu_first_seen
    a = dict(cpu=dict(model="AMD EPYC", avx512_bf16=True))
    b = dict(cpu=dict(model="AMD EPYC", id="family 25 model 17 stepping 1", avx512_bf16=True))
    runs = [dict(b, time="2026-12-05 14:36"), dict(a, time="2026-12-05 13:10"), dict(a, time="2026-12-05 13:02")]
    assert list(cpu_first_seen(runs).items()) == [("AMD EPYC (avx512_bf16)", "2026-12-05 13:02"),
                                                  ("AMD EPYC family 25 model 17 (avx512_bf16)", "2026-12-05 14:36")]
