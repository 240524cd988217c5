"Precision 'auto': bf16 only where the device computes it natively, fp32 elsewhere, said once and recorded in checkpoints."
import pathlib, pytest, torch
from annotated_transformer import train as T
from annotated_transformer.checkpoint import load_checkpoint
from annotated_transformer.config import TransformerConfig
from annotated_transformer.data import copy_task_pairs
from annotated_transformer.batching import make_loader
from annotated_transformer.model import make_model

CPU = torch.device("cpu")

@pytest.mark.parametrize("flags, want", [({"avx2", "fma"}, "fp32"), ({"avx2", "avx512f", "avx512_bf16"}, "bf16"),
                                         ({"avx2", "amx_tile", "amx_bf16"}, "bf16"), ({"avx512f", "avx512_vnni"}, "fp32")])
def test_auto_on_cpu_follows_the_flags(monkeypatch, flags, want):
    monkeypatch.setattr(T, "cpu_flags", lambda: flags)
    chosen, why = T.resolve_precision("auto", CPU)
    assert chosen == want and why.startswith("auto: ")
    if want == "bf16": assert any(f in why for f in T.NATIVE_BF16_FLAGS)
    else: assert "amx_bf16" in why and "avx512_bf16" in why  # says what it looked for

def test_auto_without_readable_flags_is_fp32(monkeypatch):
    monkeypatch.setattr(T, "cpu_flags", lambda: set())  # e.g. macOS or Windows: no /proc/cpuinfo
    assert T.resolve_precision("auto", CPU) == ("fp32", T.resolve_precision("auto", CPU)[1])
    assert "could not be read" in T.resolve_precision("auto", CPU)[1]

def test_explicit_precision_is_kept(monkeypatch):
    monkeypatch.setattr(T, "cpu_flags", lambda: {"avx2"})
    for p in ("fp32", "bf16", "fp16"): assert T.resolve_precision(p, CPU) == (p, "as asked")

@pytest.mark.parametrize("native, want", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cuda_asks_torch(monkeypatch, native, want):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    chosen, why = T.resolve_precision("auto", torch.device("cuda:0"))
    assert chosen == want and "Some GPU" in why

def test_cpu_flags_reads_proc_cpuinfo(cpu_without_native_bf16):
    got = cpu_without_native_bf16()  # the real reader (conftest patches T.cpu_flags for every test)
    assert isinstance(got, set)
    info = pathlib.Path("/proc/cpuinfo")
    if info.is_file() and "\nflags" in "\n" + info.read_text():
        assert {"fpu", "sse2"} <= got  # every x86-64 CPU has these
        assert bool(got & set(T.NATIVE_BF16_FLAGS)) == any(f" {f}" in info.read_text() for f in T.NATIVE_BF16_FLAGS)

def test_config_accepts_auto_and_refuses_others():
    assert T.TrainConfig().precision == "auto"
    with pytest.raises(ValueError, match="expected 'auto', 'fp32', 'bf16' or 'fp16'"): T.TrainConfig(precision="bf32")

@pytest.mark.parametrize("flags, want", [({"avx2"}, "fp32"), ({"avx512_bf16"}, "bf16")])
def test_trainer_prints_the_choice_and_checkpoints_record_it(tmp_path, monkeypatch, capsys, flags, want):
    monkeypatch.setattr(T, "cpu_flags", lambda: flags)
    model = make_model(TransformerConfig.tiny())
    cfg = T.TrainConfig(max_steps=2, warmup_steps=2, max_tokens=40, device="cpu", run_dir=str(tmp_path), progress=False,
                          eval_every=0, save_every=0)
    tr = T.Trainer(model, cfg, make_loader(copy_task_pairs(16, vocab_size=16, seed=0), max_tokens=40))
    out = capsys.readouterr().out
    assert out.count(f"precision {want} (auto: ") == 1
    assert tr.cfg.precision == want and cfg.precision == "auto"  # the caller's config is not changed
    tr.fit()
    assert load_checkpoint(tmp_path)["train_config"]["precision"] == want
