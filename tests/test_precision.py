"""Precision 'auto': fp32 where bf16 would be emulated, the faster of a timed trial where the CPU has native bf16 (remembered per
machine and model), bf16 on GPUs with native bf16; said once and recorded in checkpoints; the same in every process a test starts."""
import json, os, pathlib, subprocess, sys, pytest, torch
from annotated_transformer.engine import train as T, precision as PR
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.training.data import copy_task_pairs
from annotated_transformer.training.batching import make_loader
from annotated_transformer.architecture.model import make_model

CPU = torch.device("cpu")
BF16_FASTER, FP32_FASTER = (lambda: dict(fp32=2.0, bf16=1.0)), (lambda: dict(fp32=1.0, bf16=2.0))

def never(): raise AssertionError("the trial ran where it must not")

@pytest.fixture
def cache(tmp_path, monkeypatch):
    "A fresh cache directory (where 'auto' remembers its trials)."
    monkeypatch.setenv("AT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "precision.json"

@pytest.mark.parametrize("flags", [{"avx2", "fma"}, {"avx512f", "avx512_vnni"}])
def test_auto_without_native_bf16_is_fp32_without_a_trial(monkeypatch, cache, flags):
    monkeypatch.setattr(PR, "cpu_flags", lambda: flags)
    chosen, why = PR.resolve_precision("auto", CPU, trial=never, key=dict(model=1))
    assert chosen == "fp32" and why.startswith("auto: ") and "amx_bf16" in why and "avx512_bf16" in why  # says what it looked for
    assert not cache.exists()

@pytest.mark.parametrize("flags", [{"avx2", "avx512f", "avx512_bf16"}, {"avx2", "amx_tile", "amx_bf16"}])
@pytest.mark.parametrize("trial, want", [(BF16_FASTER, "bf16"), (FP32_FASTER, "fp32")])
def test_auto_with_native_bf16_takes_the_faster_of_the_trial(monkeypatch, cache, flags, trial, want):
    monkeypatch.setattr(PR, "cpu_flags", lambda: flags)
    chosen, why = PR.resolve_precision("auto", CPU, trial=trial, key=dict(model=1))
    assert chosen == want and any(f in why for f in PR.NATIVE_BF16_FLAGS)
    assert ("2.00x" if want == "bf16" else "0.50x") in why  # the measured ratio, bf16 speed / fp32 speed
    # remembered under the key: the next run of the same model on this machine does not measure again ...
    assert json.loads(cache.read_text())[json.dumps(dict(model=1))]["precision"] == want
    again, why = PR.resolve_precision("auto", CPU, trial=never, key=dict(model=1))
    assert again == want and "remembered" in why
    # ... but another model (another key) does
    assert PR.resolve_precision("auto", CPU, trial=FP32_FASTER if want == "bf16" else BF16_FASTER, key=dict(model=2))[0] != want

def test_auto_with_native_bf16_and_nothing_measured_is_fp32(monkeypatch, cache):
    monkeypatch.setattr(PR, "cpu_flags", lambda: {"avx512_bf16"})
    chosen, why = PR.resolve_precision("auto", CPU)
    assert chosen == "fp32" and "nothing was measured" in why

def test_a_damaged_cache_is_measured_again(monkeypatch, cache):
    monkeypatch.setattr(PR, "cpu_flags", lambda: {"avx512_bf16"})
    cache.parent.mkdir(parents=True); cache.write_text("{not json")
    assert PR.resolve_precision("auto", CPU, trial=BF16_FASTER, key=dict(model=1))[0] == "bf16"
    assert json.loads(cache.read_text())[json.dumps(dict(model=1))]["precision"] == "bf16"  # and rewritten whole

def test_auto_without_readable_flags_is_fp32(monkeypatch):
    monkeypatch.setattr(PR, "cpu_flags", lambda: set())  # e.g. macOS or Windows: no /proc/cpuinfo
    chosen, why = PR.resolve_precision("auto", CPU, trial=never)
    assert chosen == "fp32" and "could not be read" in why

def test_explicit_precision_is_kept(monkeypatch):
    monkeypatch.setattr(PR, "cpu_flags", lambda: {"avx2"})
    for p in ("fp32", "bf16", "fp16"): assert PR.resolve_precision(p, CPU, trial=never) == (p, "as asked")

def test_autocast_refuses_an_unresolved_auto():
    with pytest.raises(ValueError, match="resolve it first"): PR.autocast_for(CPU, "auto")

@pytest.mark.parametrize("native, want", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cuda_asks_torch(monkeypatch, native, want):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    chosen, why = PR.resolve_precision("auto", torch.device("cuda:0"), trial=never)
    assert chosen == want and "Some GPU" in why

def test_cpu_flags_reads_proc_cpuinfo(cpu_without_native_bf16):
    got = cpu_without_native_bf16()  # the real reader, without $AT_CPU_FLAGS
    assert isinstance(got, set)
    info = pathlib.Path("/proc/cpuinfo")
    if info.is_file() and "\nflags" in "\n" + info.read_text():
        assert {"fpu", "sse2"} <= got  # every x86-64 CPU has these
        assert bool(got & set(PR.NATIVE_BF16_FLAGS)) == any(f" {f}" in info.read_text() for f in PR.NATIVE_BF16_FLAGS)

def test_cpu_flags_of_the_environment_reach_subprocesses(monkeypatch):
    code = "from annotated_transformer.engine.precision import cpu_flags; print(' '.join(sorted(cpu_flags())))"
    for flags in ("avx2 avx512_bf16", "avx2"):
        monkeypatch.setenv("AT_CPU_FLAGS", flags)
        assert PR.cpu_flags() == set(flags.split())
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        assert set(out) == set(flags.split())

def test_config_accepts_auto_and_refuses_others():
    assert T.TrainConfig().precision == "auto"
    with pytest.raises(ValueError, match="expected 'auto', 'fp32', 'bf16' or 'fp16'"): T.TrainConfig(precision="bf32")

def _trainer(tmp_path, name="run", **kw):
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny())
    cfg = T.TrainConfig(max_steps=2, warmup_steps=2, max_tokens=40, device="cpu", run_dir=str(tmp_path / name), progress=False,
                        eval_every=0, save_every=0, **kw)
    return T.Trainer(model, cfg, make_loader(copy_task_pairs(16, vocab_size=16, seed=0), max_tokens=40)), cfg

@pytest.mark.parametrize("flags, trial, want", [("avx2", never, "fp32"), ("avx512_bf16", BF16_FASTER, "bf16"),
                                                ("avx512_bf16", FP32_FASTER, "fp32")])
def test_trainer_prints_the_choice_and_checkpoints_record_it(tmp_path, monkeypatch, capsys, cache, flags, trial, want):
    monkeypatch.setenv("AT_CPU_FLAGS", flags)
    monkeypatch.setattr(T, "precision_trial", lambda model, batch, device, **kw: trial())
    tr, cfg = _trainer(tmp_path)
    out = capsys.readouterr().out
    assert out.count(f"precision {want} (auto: ") == 1
    assert tr.cfg.precision == want and cfg.precision == "auto"  # the caller's config is not changed
    tr.fit()
    assert load_checkpoint(tmp_path / "run").train_config["precision"] == want
    info = json.loads((tmp_path / "run" / "run.json").read_text())  # run.json says what ran, not "auto"
    assert info["precision"] == want and info["compile"] in ("on", "off")
    if flags != "avx2":  # a second run of the same model here reads the answer instead of measuring again
        monkeypatch.setattr(T, "precision_trial", lambda model, batch, device, **kw: never())
        tr2, _ = _trainer(tmp_path, "run2")
        assert tr2.cfg.precision == want and "remembered" in capsys.readouterr().out

def test_a_real_trial_leaves_the_run_as_a_run_given_its_precision(tmp_path, monkeypatch, cache):
    "The trial times a copy on a batch of its own: the run then trains exactly as one started with the chosen precision."
    monkeypatch.setenv("AT_CPU_FLAGS", "avx2 avx512_bf16")
    auto, _ = _trainer(tmp_path, "auto")
    t = json.loads(cache.read_text()).popitem()[1]["seconds"]
    assert set(t) == {"fp32", "bf16"} and all(v > 0 for v in t.values())
    assert auto.cfg.precision == ("bf16" if t["bf16"] < t["fp32"] else "fp32")
    a = auto.fit()
    monkeypatch.setenv("AT_CPU_FLAGS", "avx2")
    given, _ = _trainer(tmp_path, "given", precision=auto.cfg.precision)
    assert given.fit()["loss"] == a["loss"]
    for p, q in zip(auto.model.parameters(), given.model.parameters()): assert torch.equal(p, q)

def test_precision_trial_touches_neither_model_nor_generator():
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(dropout=0.1))
    batch = next(iter(make_loader(copy_task_pairs(16, vocab_size=16, seed=0), max_tokens=40)))
    before, rng = [p.detach().clone() for p in model.parameters()], torch.get_rng_state()
    t = PR.precision_trial(model, batch, CPU, steps=1)
    assert set(t) == {"fp32", "bf16"} and all(v > 0 for v in t.values())
    assert torch.equal(torch.get_rng_state(), rng)
    for p, q in zip(before, model.parameters()): assert torch.equal(p, q) and q.grad is None
