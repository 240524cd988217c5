"""Compile 'auto' (TrainConfig.compile, the default): eager for runs too short to pay for a compile, compiled where a trial on
this machine measured compiled steps faster and paying back within half of the run; remembered per machine and model; printed
once and recorded in checkpoints as 'on' or 'off'."""
import json, pytest, torch
from annotated_transformer.engine import train as T, precision as PR
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.engine.config import TransformerConfig, TrainConfig
from annotated_transformer.training.data import copy_task_pairs
from annotated_transformer.training.batching import make_loader
from annotated_transformer.architecture.model import make_model

CPU = torch.device("cpu")

def never(compiled): raise AssertionError("the trial ran where it must not")

def fake(eager_s, compiled_s=None, first_pass_s=None, calls=None):
    "A compile trial's answer over 3 batches; compiled_s None: torch.compile fails."
    def trial(compiled):
        if calls is not None: calls.append(compiled)
        if compiled and compiled_s is None: raise RuntimeError("inductor: no working C++ compiler\nmore lines")
        return dict(eager_s=eager_s, batches=3, **(dict(compiled_s=compiled_s, first_pass_s=first_pass_s) if compiled else {}))
    return trial

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "compile.json"


def test_on_and_off_are_obeyed_without_a_trial(cache):
    assert PR.resolve_compile("on", 1, never) == (True, "as asked")
    assert PR.resolve_compile("off", 10**9, never) == (False, "as asked")
    assert not cache.exists()


def test_a_short_run_is_eager_after_timing_eager_steps_only(cache):
    calls = []
    on, why = PR.resolve_compile("auto", 1000, fake(0.5, 0.1, 1.0, calls), key=dict(m=1))  # 1000 x 0.5 s < an hour
    assert not on and calls == [False] and "min eager" in why
    assert not cache.exists()  # nothing compiled, nothing remembered: a longer run of the same model will measure


def test_a_long_run_compiles_where_it_pays_and_remembers(cache):
    calls = []
    on, why = PR.resolve_compile("auto", 20_000, fake(1.0, 0.8, 62.4, calls), key=dict(m=1))
    assert on and calls == [False, True] and "1.25x" in why and "after 300 of the 20000 steps" in why  # (62.4-2.4)/(3-2.4) x 3
    entry = json.loads(cache.read_text())[json.dumps(dict(m=1), sort_keys=True)]
    assert entry["compiled_s"] == 0.8 and entry["first_pass_s"] == 62.4
    again, why = PR.resolve_compile("auto", 20_000, never, key=dict(m=1))
    assert again and "remembered" in why
    # the remembered times are judged against the steps this run has left
    assert not PR.resolve_compile("auto", 500, never, key=dict(m=1))[0]


@pytest.mark.parametrize("trial, steps, words", [
    (fake(1.0, 0.99, 60.0), 20_000, "under the 1.03x"),  # within the trial's noise
    (fake(40.0, 32.0, 648.0), 100, "more than half of the 100 left"),  # pays back after 69 steps
    (fake(1.0), 20_000, "torch.compile failed in a trial on this machine (0 s) (RuntimeError: inductor: no working C++ compiler)")])
def test_auto_stays_eager_where_compiling_does_not_pay(cache, trial, steps, words):
    on, why = PR.resolve_compile("auto", steps, trial, key=dict(m=2))
    assert not on and words in why, why


def test_accumulation_counts_micro_batch_steps(cache):
    "The trial times micro-batches: with 4 per optimizer step, 300 optimizer steps are 1200 of them, and pay-back is in optimizer steps."
    assert not PR.resolve_compile("auto", 300, fake(4.0, 3.2, 249.6), key=dict(m=3), accum=1)[0]  # 1200 s eager: too short
    on, why = PR.resolve_compile("auto", 300, fake(4.0, 3.2, 249.6), key=dict(m=4), accum=4)
    assert on and "after 75 of the 300 steps" in why, why


def test_a_damaged_cache_is_measured_again(cache):
    cache.parent.mkdir(parents=True); cache.write_text("{not json")
    assert PR.resolve_compile("auto", 20_000, fake(1.0, 0.8, 62.4), key=dict(m=1))[0]
    assert json.loads(cache.read_text())  # rewritten whole


def test_unknown_values_are_refused_in_one_line():
    with pytest.raises(ValueError, match="compile='yes': expected one of 'auto', 'on', 'off'"): TrainConfig(compile="yes")
    with pytest.raises(ValueError, match="compile='yes'"): PR.resolve_compile("yes", 10)
    assert TrainConfig().compile == "auto"
    assert TrainConfig(compile=True).compile == "on" and TrainConfig(compile=False).compile == "off"  # as older runs stored it


def _trainer(tmp_path, name="run", max_steps=4, **kw):
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny())
    cfg = TrainConfig(max_steps=max_steps, warmup_steps=2, max_tokens=40, device="cpu", run_dir=str(tmp_path / name),
                      progress=False, eval_every=0, save_every=0, **kw)
    return T.Trainer(model, cfg, make_loader(copy_task_pairs(32, vocab_size=16, seed=0), max_tokens=40)), cfg


def test_the_trainer_trains_a_short_run_eager_and_records_off(tmp_path, monkeypatch, capsys, cache):
    real, seen = PR.compile_trial, []
    def spy(model, batches, device, precision="fp32", compiled=True, **kw):
        seen.append((len(batches), precision, compiled))
        return real(model, batches, device, precision, compiled=compiled, **kw)
    monkeypatch.setattr(T, "compile_trial", spy)
    tr, cfg = _trainer(tmp_path)
    out = capsys.readouterr().out
    assert out.count("compile off (auto: the 4 steps left take about") == 1, out
    assert seen == [(3, "fp32", False)]  # three of the run's batches, eager only
    assert tr.cfg.compile == "off" and cfg.compile == "auto"  # the caller's config is not changed
    assert not isinstance(tr.forward, torch._dynamo.eval_frame.OptimizedModule)
    tr.fit()
    assert load_checkpoint(tmp_path / "run").train_config["compile"] == "off"


def test_the_trainer_compiles_where_the_trial_says_it_pays(tmp_path, monkeypatch, capsys, cache):
    got = []
    def trial(model, batches, device, precision="fp32", compiled=True, **kw):
        got.append(compiled)
        return dict(eager_s=1.0, batches=3, **(dict(compiled_s=0.5, first_pass_s=31.5) if compiled else {}))
    monkeypatch.setattr(T, "compile_trial", trial)
    tr, _ = _trainer(tmp_path, max_steps=5000)
    assert got == [False, True] and tr.cfg.compile == "on"
    assert isinstance(tr.forward, torch._dynamo.eval_frame.OptimizedModule)  # compiled (lazily: nothing has run yet)
    assert "compile on (auto: a trial on this machine (0 s) measured compiled steps at 2.00x" in capsys.readouterr().out
    # the readable loss is for reading: auto keeps it eager
    model = make_model(TransformerConfig.tiny())
    cfg = TrainConfig(max_steps=5000, max_tokens=40, device="cpu", run_dir=str(tmp_path / "readable"), progress=False)
    tr = T.Trainer(model, cfg, make_loader(copy_task_pairs(32, vocab_size=16, seed=0), max_tokens=40), loss="readable")
    assert tr.cfg.compile == "off" and "readable loss" in capsys.readouterr().out


def test_the_eager_trial_leaves_the_run_as_a_run_given_off(tmp_path, cache):
    "Timing eager steps on a copy and three batches of its own: the run then trains exactly as one given compile='off'."
    auto, _ = _trainer(tmp_path, "auto")
    given, _ = _trainer(tmp_path, "given", compile="off")
    assert auto.fit()["loss"] == given.fit()["loss"]
    for p, q in zip(auto.model.parameters(), given.model.parameters()): assert torch.equal(p, q)


@pytest.mark.slow
def test_a_real_compile_trial_times_both_and_touches_nothing():
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(dropout=0.1))
    batches = [next(iter(make_loader(copy_task_pairs(32, vocab_size=16, seed=0), max_tokens=40)))]  # one shape: one compile
    before, rng = [p.detach().clone() for p in model.parameters()], torch.get_rng_state()
    t = PR.compile_trial(model, batches, CPU, reps=1)
    assert t["batches"] == 1 and all(t[k] > 0 for k in ("eager_s", "compiled_s", "first_pass_s"))
    assert torch.equal(torch.get_rng_state(), rng)
    for p, q in zip(before, model.parameters()): assert torch.equal(p, q) and q.grad is None
