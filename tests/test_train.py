"""Trainer invariants: accumulation == one big batch, resume continues identically, atomic checkpoints,
averaging, NaN stop, signal handling, unwritable checkpoint directory."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from dataclasses import replace
import torch
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.training.data import copy_task_pairs
from annotated_transformer.training.batching import make_loader, collate
from annotated_transformer.architecture.model import make_model
from annotated_transformer.engine import train as T
from annotated_transformer.engine.train import Trainer, TrainingError, seed_everything
from annotated_transformer.engine.config import TrainConfig
from annotated_transformer.engine.checkpoint import (average_checkpoints, load_checkpoint, list_checkpoints, save_checkpoint,
                                              CheckpointError)
from annotated_transformer.engine.runs import read_metrics
from annotated_transformer.training.loss import SequenceObjective
from annotated_transformer.engine.memory_budget import max_tokens_for_memory

REPO = Path(__file__).resolve().parents[1]
PAIRS = copy_task_pairs(96, vocab_size=16, min_len=2, max_len=9, seed=0)


def make_trainer(run_dir, dropout=0.0, max_tokens=40, val=False, **kw):
    seed_everything(0)
    model = make_model(TransformerConfig.tiny(dropout=dropout, label_smoothing=0.1))
    cfg = TrainConfig(**{**dict(max_steps=6, warmup_steps=4, lr_factor=1.0, max_tokens=max_tokens, device="cpu",
                                   run_dir=str(run_dir), progress=False, log_every=1, save_every=0, eval_every=0), **kw})
    train = make_loader(PAIRS, max_tokens=max_tokens, seed=cfg.seed)
    val_loader = make_loader(PAIRS[:16], max_tokens=64, shuffle=False) if val else None
    return Trainer(model, cfg, train, val_loader)


def params(model): return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_accumulation_equals_one_big_batch(tmp_path):
    "k micro-batches with unequal padding, accumulated, give the same update as one batch of all their pairs."
    groups = [PAIRS[0:3], PAIRS[3:10], PAIRS[10:12]]  # different sizes and token counts
    # Adam's first update is about lr * sign(g): with eps=1e-9 a gradient entry of 1e-12 flips sign on rounding noise.
    # A larger eps makes the update a smooth function of the gradient, so allclose compares gradients, not noise.
    small = make_trainer(tmp_path / "a", accum_steps=3, eps=1e-3)
    big = make_trainer(tmp_path / "b", eps=1e-3)
    assert torch.equal(params(small.model), params(big.model))
    m_small = small.train_step([collate(g) for g in groups])
    m_big = big.train_step([collate([p for g in groups for p in g])])
    assert m_small["tokens"] == m_big["tokens"]
    assert m_small["loss"] == pytest.approx(m_big["loss"], rel=1e-6)
    assert m_small["grad_norm"] == pytest.approx(m_big["grad_norm"], rel=1e-5)
    torch.testing.assert_close(params(small.model), params(big.model), rtol=1e-5, atol=1e-6)
    assert not torch.equal(params(small.model), params(make_trainer(tmp_path / "c").model))  # it did move
    # the schedule counts optimizer steps, not micro-batches
    assert small.scheduler.last_epoch == big.scheduler.last_epoch == 1


class PerSentence:
    "An objective whose loss is a mean over sentences, as the chart parser's: the loss divides by `count`, tokens/s counts `tokens`."
    def count(self, b): return b.src.size(0)
    def tokens(self, b): return int((b.tgt_out != 0).sum())
    def loss(self, model, b): return -model(b.src, b.tgt_in, b.src_key_padding_mask, b.tgt_key_padding_mask).log_softmax(-1)[..., 3].mean(-1).sum()


def test_objective_loss_per_sentence_and_tokens_per_s_in_tokens(tmp_path):
    "An objective's loss is averaged over what it counts (sentences), while tokens_per_s counts its tokens, not its sentences."
    seed_everything(0)
    model = make_model(TransformerConfig.tiny(dropout=0.0))
    cfg = TrainConfig(max_steps=2, warmup_steps=4, max_tokens=40, device="cpu", precision="fp32", run_dir=str(tmp_path),
                      progress=False, log_every=2, save_every=0, eval_every=0)
    t = Trainer(model, cfg, make_loader(PAIRS, max_tokens=40, seed=0), objective=PerSentence())
    b = collate(PAIRS[:5])
    with torch.no_grad(): per_sentence = PerSentence().loss(t.model, b).item() / 5
    m = t.train_step([b])
    assert m["loss_units"] == 5 and m["tokens"] == int((b.tgt_out != 0).sum()) > 5
    assert m["loss"] == pytest.approx(per_sentence, rel=1e-5)
    t.fit()
    rec = [r for r in read_metrics(tmp_path) if "tokens_per_s" in r][-1]
    assert rec["step"] == 2 and rec["tokens_per_s"] > 0 and rec["loss"] > 0


def test_mean_of_micro_batch_means_differs(tmp_path):
    "The naive normalization (mean of each micro-batch's mean) gives another update: the test above can fail."
    groups = [PAIRS[0:1], PAIRS[1:12]]
    a = make_trainer(tmp_path / "a", accum_steps=2, eps=1e-3); b = make_trainer(tmp_path / "b", eps=1e-3)
    # the naive loop: each micro-batch normalized by its own tokens, the means averaged
    ma = [collate(g) for g in groups]
    n = [int((mb.tgt_out != 0).sum()) for mb in ma]
    assert n[0] != n[1]
    a.model.train()
    for mb in ma:
        s, k = a.objective.criterion(a.model(mb.src, mb.tgt_in, mb.src_key_padding_mask, mb.tgt_key_padding_mask), mb.tgt_out)
        (s / k / len(ma)).backward()
    a.optimizer.step()
    b.train_step([collate(groups[0] + groups[1])])
    assert not torch.allclose(params(a.model), params(b.model), rtol=1e-5, atol=1e-6)


def test_resume_reproduces_uninterrupted_run(tmp_path):
    "Train 6 steps; separately train 3, checkpoint, resume in a new Trainer, train to 6: same losses, same weights."
    full = make_trainer(tmp_path / "full", dropout=0.1)
    full.fit()
    losses_full = [r["loss"] for r in read_metrics(tmp_path / "full") if "loss" in r]
    first = make_trainer(tmp_path / "part", dropout=0.1, max_steps=3)
    first.fit()
    torch.manual_seed(123)  # disturb the generators: resume must restore them
    resumed = make_trainer(tmp_path / "part", dropout=0.1, resume=True)
    assert resumed.step == 3 and resumed.scheduler.last_epoch == 3
    resumed.fit()
    losses_resumed = [r["loss"] for r in read_metrics(tmp_path / "part") if "loss" in r]
    assert len(losses_full) == len(losses_resumed) == 6
    assert losses_resumed == losses_full  # bit-identical on CPU in fp32
    assert torch.equal(params(resumed.model), params(full.model))


def test_resume_between_logged_steps_logs_the_losses_of_an_unbroken_run(tmp_path):
    """Logged every 4 steps, saved every 6: the checkpoint at step 6 falls inside a logging window (steps 5-8). The resumed
    run's step-8 record must average steps 5-8, as the unbroken run's does; it averaged 7-8 when the window was not saved."""
    import shutil
    full = make_trainer(tmp_path / "full", dropout=0.1, max_steps=12, log_every=4, save_every=6, keep_last=5)
    full.fit()
    part = tmp_path / "part"; shutil.copytree(tmp_path / "full", part)  # as if it had stopped right after its step-6 checkpoint
    (part / "ckpt_0000012.pt").unlink(); (part / "latest").write_text("ckpt_0000006.pt\n")
    torch.manual_seed(123)
    resumed = make_trainer(part, dropout=0.1, max_steps=12, log_every=4, save_every=6, keep_last=5, resume=True)
    assert resumed.step == 6
    resumed.fit()
    logged = lambda run: [(r["step"], r["loss"]) for r in read_metrics(run) if "loss" in r]
    assert logged(part) == logged(tmp_path / "full") and [s for s, _ in logged(part)] == [4, 8, 12]
    assert torch.equal(params(resumed.model), params(full.model))


def test_a_checkpoint_without_the_logging_window_still_resumes(tmp_path):
    "Checkpoints written before the window was saved (no `log_window` in their extra) resume with an empty window."
    first = make_trainer(tmp_path, max_steps=3, log_every=2)
    first.fit()
    ck = load_checkpoint(tmp_path); assert ck.log_window is not None
    ck.log_window = None; ck.more.pop("log_window", None)
    from annotated_transformer.engine.checkpoint import write_checkpoint
    write_checkpoint(ck, list_checkpoints(tmp_path)[-1])
    resumed = make_trainer(tmp_path, max_steps=6, log_every=2, resume=True)
    assert resumed.step == 3
    resumed.fit()
    assert [r["step"] for r in read_metrics(tmp_path) if "loss" in r] == [2, 3, 4, 6]

def test_checkpoint_is_self_describing_and_keeps_last_k(tmp_path):
    tr = make_trainer(tmp_path, max_steps=6, save_every=1, keep_last=3)
    tr.fit()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_0000004.pt", "ckpt_0000005.pt", "ckpt_0000006.pt"]
    assert load_checkpoint(tmp_path).path.name == "ckpt_0000006.pt"
    ck = load_checkpoint(tmp_path)  # weights_only=True
    assert ck.step == 6 and ck.train_config["max_steps"] == 6
    model = ck.build()
    assert torch.equal(params(model), params(tr.model))
    assert not list(tmp_path.glob("*.tmp"))


def test_averaging_is_the_mean_of_parameters(tmp_path):
    tr = make_trainer(tmp_path, max_steps=4, save_every=1, keep_last=4)
    tr.fit()
    paths = list_checkpoints(tmp_path)[-3:]
    avg = average_checkpoints(paths, tmp_path / "avg.pt")
    models = [load_checkpoint(p).build() for p in paths]
    expected = torch.stack([params(m) for m in models]).mean(0)
    torch.testing.assert_close(params(load_checkpoint(tmp_path / "avg.pt").build()), expected)
    assert not torch.allclose(expected, params(models[-1]))  # the checkpoints differ, so the mean is not trivial
    with pytest.raises(ValueError, match="at least one"): average_checkpoints([])


def test_interrupted_write_leaves_previous_checkpoint(tmp_path, monkeypatch):
    tr = make_trainer(tmp_path, max_steps=2)
    tr.fit()
    good = load_checkpoint(tmp_path).path
    real_save = torch.save

    def crashing_save(obj, f, *a, **k):
        f.write(b"PK\x03\x04 partial bytes of a checkpoint")  # some bytes reach the disk, then the process dies
        raise OSError("simulated crash during write")
    monkeypatch.setattr(T.torch, "save", crashing_save)
    tr.step = 3
    with pytest.raises(OSError, match="simulated crash"): tr.save()
    monkeypatch.setattr(T.torch, "save", real_save)
    assert load_checkpoint(tmp_path).path == good
    assert load_checkpoint(tmp_path).step == 2
    assert not (tmp_path / "ckpt_0000003.pt").exists() and not list(tmp_path.glob("*.tmp"))


def test_nan_loss_stops_with_step_and_keeps_last_good_checkpoint(tmp_path):
    tr = make_trainer(tmp_path, max_steps=10, save_every=2)
    crit = tr.objective.chunked_criterion  # the loss the trainer uses (its default objective: the chunked form)
    real = crit.forward

    def poisoned(*args):
        s, n = real(*args)
        return (s * float("nan") if tr.step == 4 else s), n  # the 5th update
    crit.forward = poisoned
    before = None
    with pytest.raises(TrainingError, match=r"step 5: the loss is nan.*ckpt_0000004\.pt"):
        tr.fit()
    assert load_checkpoint(tmp_path).path.name == "ckpt_0000004.pt"
    ck = load_checkpoint(tmp_path)
    assert all(torch.isfinite(v).all() for v in ck.weights.values())
    assert all(torch.isfinite(p).all() for p in tr.model.parameters())  # the update was not applied


def test_unwritable_checkpoint_dir_fails_at_start(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError, match="a_file/run. is not a writable directory"):
        make_trainer(blocker / "run")


def test_a_trainer_never_starts_over_a_run(tmp_path):
    "The Python API refuses as at-train does: a new run over a run's checkpoints, and --resume over a best.pt with no ckpt_*.pt."
    run = tmp_path / "run"
    make_trainer(run, max_steps=2, save_every=2).fit()
    with pytest.raises(CheckpointError, match="continue it with --resume"): make_trainer(run)
    last = list_checkpoints(run)[-1]; last.rename(run / "best.pt"); kept = (run / "best.pt").read_bytes()
    for p in list_checkpoints(run): p.unlink()
    with pytest.raises(CheckpointError, match=r"no ckpt_\*\.pt to continue from"): make_trainer(run, resume=True)
    assert (run / "best.pt").read_bytes() == kept
    make_trainer(tmp_path / "fresh", resume=True)  # --resume where nothing was trained starts the run

def test_validation_and_metrics_file(tmp_path):
    tr = make_trainer(tmp_path, max_steps=4, eval_every=2, val=True)
    out = tr.fit()
    recs = read_metrics(tmp_path)
    val = [r for r in recs if "val_loss" in r]
    assert [r["step"] for r in val] == [2, 4]
    assert out["val_ppl"] == pytest.approx(torch.tensor(out["val_nll"]).exp().item(), rel=1e-6)
    train = [r for r in recs if "loss" in r]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert {"lr", "grad_norm", "tokens_per_s", "mem_mb"} <= set(train[0])


def test_evaluate_is_the_label_smoothed_loss_and_cross_entropy_per_target_token(tmp_path):
    "The default objective's validation: §5.4's loss and the plain cross-entropy summed over the loader, per target token."
    tr = make_trainer(tmp_path, val=True)
    F, s, nll, n = torch.nn.functional, 0.0, 0.0, 0
    tr.model.eval()
    with torch.no_grad():
        for b in tr.val_loader:
            logits = tr.model(b.src, b.tgt_in, b.src_key_padding_mask, b.tgt_key_padding_mask).flatten(0, 1)
            s += F.cross_entropy(logits, b.tgt_out.flatten(), ignore_index=0, label_smoothing=0.1, reduction="sum").item()
            nll += F.cross_entropy(logits, b.tgt_out.flatten(), ignore_index=0, reduction="sum").item()
            n += int((b.tgt_out != 0).sum())
    tr.model.train()
    v = tr.evaluate()
    assert set(v) == {"val_loss", "val_nll", "val_ppl", "val_tokens"} and v["val_tokens"] == n
    assert v["val_loss"] == pytest.approx(s / n, rel=1e-5) and v["val_nll"] == pytest.approx(nll / n, rel=1e-5)
    assert v["val_loss"] != v["val_nll"] and tr.model.training  # two different losses; training mode is back

def test_the_clock_counts_on_across_a_resume(tmp_path):
    "Every record carries the seconds spent in fit so far (wall and CPU); a resumed run counts on from its checkpoint's clock."
    first = make_trainer(tmp_path, max_steps=3, eval_every=3, val=True)
    first.fit()
    clock = load_checkpoint(tmp_path).clock
    assert 0 < clock["train_s"] <= first.elapsed()["train_s"] and 0 < clock["cpu_s"] <= first.elapsed()["cpu_s"]  # saved just before fit returned
    resumed = make_trainer(tmp_path, max_steps=6, eval_every=3, val=True, resume=True)
    assert resumed.elapsed() == clock  # restored, and not running until fit starts
    resumed.fit()
    recs = read_metrics(tmp_path)
    assert [r["step"] for r in recs if "val_loss" in r] == [3, 6]
    for key in ("train_s", "cpu_s"):
        seq = [r[key] for r in recs]
        assert all(a <= b for a, b in zip(seq, seq[1:])), (key, seq)  # never goes back at the resume
        after = [r[key] for r in recs if r["step"] > 3]
        assert after and min(after) > clock[key]
    assert load_checkpoint(tmp_path).clock["cpu_s"] >= recs[-1]["cpu_s"]


def test_keep_best_writes_the_best_checkpoint_and_names_a_missing_metric(tmp_path):
    "keep_best keeps run_dir/best.pt at the step where the metric peaked (here the negated loss, via a patched evaluate); a metric validation does not give is refused by name."
    tr = make_trainer(tmp_path / "a", max_steps=6, eval_every=2, val=True)
    tr.cfg = replace(tr.cfg, keep_best="val_score")  # a metric of the patched evaluate below: the objective names its own
    scores = iter([1.0, 3.0, 2.0])  # steps 2, 4, 6: the best is at step 4
    tr.evaluate = lambda loader=None: dict(val_score=next(scores))
    tr.fit()
    best = load_checkpoint(tmp_path / "a" / "best.pt")
    assert best.step == 4 and best.best == dict(metric="val_score", value=3.0, step=4)
    assert load_checkpoint(tmp_path / "a").best["step"] == 4  # every later checkpoint carries the best so far
    with pytest.raises(TrainingError, match=r"keep_best='val_f1': validation gives \['val_loss', 'val_nll', 'val_ppl', 'val_tokens'\]"):
        make_trainer(tmp_path / "b", max_steps=2, eval_every=2, val=True, keep_best="val_f1")  # refused before any step
    assert not (tmp_path / "b" / "metrics.jsonl").exists()

def test_each_objective_names_the_metrics_it_gives():
    "`metrics` is what `eval_metrics` returns, so that keep_best is checked before the first step (it was at the first validation)."
    from annotated_transformer.training.loss import SequenceObjective
    from annotated_transformer.parsing.chart import ChartObjective
    assert set(SequenceObjective.eval_metrics(None, torch.tensor([3.0, 2.0, 4.0]))) == set(SequenceObjective.metrics)
    assert set(ChartObjective.eval_metrics(None, torch.tensor([5.0, 8.0, 7.0, 2.0]))) == set(ChartObjective.metrics)
    assert set(SequenceObjective.lower_is_better) < set(SequenceObjective.metrics)

def test_keep_best_on_a_loss_keeps_the_lowest(tmp_path):
    "val_loss and val_ppl are the lower the better (the objective's `lower_is_better`): best.pt is where the loss was least."
    tr = make_trainer(tmp_path, max_steps=6, eval_every=2, val=True, keep_best="val_loss")
    losses = iter([3.0, 1.0, 2.0])  # steps 2, 4, 6: the best is at step 4 (higher-is-better kept step 2, the worst)
    tr.evaluate = lambda loader=None: dict(val_loss=next(losses))
    tr.fit()
    assert load_checkpoint(tmp_path / "best.pt").best == dict(metric="val_loss", value=1.0, step=4)

def test_bf16_autocast_trains_on_cpu(tmp_path):
    tr = make_trainer(tmp_path, max_steps=2, precision="bf16")
    out = tr.fit()
    assert torch.isfinite(torch.tensor(out["loss"]))
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())  # weights stay fp32
    with pytest.raises(ValueError, match="needs a CUDA device"): make_trainer(tmp_path / "x", precision="fp16")


SIGNAL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_train import make_trainer
    tr = make_trainer({run!r}, max_steps=100000, log_every=1, compile="off")  # stopped by a signal, not long: no compile trial
    out = tr.fit()
    print("RESULT", out.get("stopped_by"), out["step"], flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])  # SIGINT: quick in test_bad_input (at-train)
def test_signal_writes_checkpoint_and_exits_cleanly(tmp_path, sig):
    run = tmp_path / "run"
    script = SIGNAL_SCRIPT.format(tests=str(Path(__file__).parent), run=str(run))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not ((run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().count("\n") >= 3):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    result = [l for l in out.splitlines() if l.startswith("RESULT")][0].split()
    assert result[1] == sig.name
    step = int(result[2])
    assert step >= 3
    assert load_checkpoint(run).step == step


def test_cli_parser_from_fields_and_clear_errors(tmp_path, capsys):
    from annotated_transformer.commands.cli import parse_args, train_main
    from annotated_transformer.engine.tasks import task_preset
    _, m, t, d = parse_args(["wmt14-base", "--max_tokens", "3125", "--precision", "bf16", "--no-progress", "--dropout", "0.2"])
    assert (m.d_model, m.dropout, t.precision, t.progress, t.max_steps, t.warmup_steps) == (512, 0.2, "bf16", False, 100_000, 4000)
    assert t.accum_for(8) == 1 and t.accum_for(1) == 8  # 25000-token batches through accumulation
    assert task_preset("wmt14-big")[1].max_steps == 300_000
    with pytest.raises(SystemExit): parse_args(["copy", "--precision", "fp8"])
    with pytest.raises(SystemExit): parse_args(["nosuchtask"])
    blocker = tmp_path / "a_file"; blocker.write_text("")
    assert train_main(["copy", "--run_dir", str(blocker / "run"), "--max_steps", "1", "--no-progress"]) == 1
    assert "is not a writable directory" in capsys.readouterr().err


def test_cli_copy_short_run_and_resume(tmp_path, capsys):
    from annotated_transformer.commands.cli import train_main
    args = ["copy", "--run_dir", str(tmp_path), "--no-progress", "--max_steps", "4", "--copy_n", "300", "--n_valid", "50",
            "--eval_every", "2", "--save_every", "2"]
    assert train_main(args) == 0
    assert "exact-match accuracy" in capsys.readouterr().out
    assert load_checkpoint(tmp_path).step == 4
    assert train_main(args[:5] + ["6"] + args[6:] + ["--resume"]) == 0
    assert "resumed from" in capsys.readouterr().out and load_checkpoint(tmp_path).step == 6
    from annotated_transformer.training.copy_task import copy_config
    assert load_checkpoint(tmp_path).build().cfg.src_vocab_size == copy_config().src_vocab_size  # the copy task's model (11)


# ---------------------------------------------------------------- fast paths: chunked loss, compile, memory sizing

def losses_of(trainer, batches):
    return [trainer.train_step([b])["loss"] for b in batches]


def test_chunked_and_readable_loss_train_identically(tmp_path):
    "The trainer's default chunked loss gives the losses and weights of the readable loss on the logits (fp32)."
    batches = [collate(PAIRS[i:i + 6]) for i in range(0, 30, 6)]
    out = {}
    for loss in ("readable", "chunked"):
        seed_everything(0)
        model = make_model(TransformerConfig.tiny(dropout=0.0, label_smoothing=0.1))
        cfg = TrainConfig(max_steps=6, warmup_steps=4, max_tokens=40, device="cpu", run_dir=str(tmp_path / loss),
                            progress=False, save_every=0, eval_every=0, eps=1e-3)  # eps: see the accumulation test
        tr = Trainer(model, cfg, make_loader(PAIRS, max_tokens=40, seed=0), loss=loss)
        assert isinstance(tr.objective, SequenceObjective) and (tr.objective.chunked_criterion is None) == (loss == "readable")
        out[loss] = (losses_of(tr, batches), params(tr.model))
    assert out["chunked"][0] == pytest.approx(out["readable"][0], rel=1e-6)
    torch.testing.assert_close(out["chunked"][1], out["readable"][1], rtol=1e-5, atol=1e-6)


def test_trainer_rejects_unknown_loss(tmp_path):
    with pytest.raises(ValueError, match="loss='fused'"):
        Trainer(make_model(TransformerConfig.tiny()), TrainConfig(device="cpu", run_dir=str(tmp_path)),
                make_loader(PAIRS, max_tokens=40), loss="fused")


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["chunked", "readable"])
def test_compiled_steps_give_the_losses_of_eager_steps(tmp_path, loss):
    "TrainConfig.compile (at-train --compile): torch.compile (inductor) of the forward pass, same losses as eager in fp32."
    batches = [collate(PAIRS[i:i + 8]) for i in range(0, 24, 8)]
    out = {}
    for compile in (False, True):
        tr = make_trainer(tmp_path / f"{compile}", compile=compile, eps=1e-3)
        if loss == "readable":  # the readable form of the default objective, on the (compiled) model
            tr.objective = SequenceObjective.from_config(tr.model.cfg, chunked=False)
            tr.forward = torch.compile(tr.model) if compile else tr.model
        out[compile] = (losses_of(tr, batches), params(tr.model))
    assert out[True][0] == pytest.approx(out[False][0], rel=1e-5)
    torch.testing.assert_close(out[True][1], out[False][1], rtol=1e-4, atol=1e-5)


def test_max_tokens_for_memory_is_the_configured_budget_on_cpu():
    assert max_tokens_for_memory(make_model(TransformerConfig.tiny()), max_tokens=1234) == 1234


@pytest.mark.cuda
def test_max_tokens_for_memory_on_cuda():
    model = make_model(TransformerConfig.tiny(src_vocab_size=500, tgt_vocab_size=500)).cuda()
    small = max_tokens_for_memory(model, 4096, fraction=0.02, start=512, limit=1 << 18)
    large = max_tokens_for_memory(model, 4096, fraction=0.2, start=512, limit=1 << 18)
    assert 512 <= small <= large and small & (small - 1) == 0
    assert all(p.grad is None for p in model.parameters())  # the trial steps leave no gradients behind


@pytest.mark.slow
def test_cli_compile_flag_trains(tmp_path, capsys):
    "`at-train copy --compile on` (the Trainer's TrainConfig.compile, generated from the field) trains end to end on the CPU."
    from annotated_transformer.commands.cli import train_main, parse_args
    assert parse_args(["copy", "--compile", "on"])[2].compile == "on" and parse_args(["copy"])[2].compile == "auto"
    args = ["copy", "--run_dir", str(tmp_path), "--no-progress", "--max_steps", "2", "--copy_n", "200", "--n_valid", "20",
            "--eval_every", "0", "--compile", "on"]
    assert train_main(args) == 0
    assert "compile on (as asked)" in capsys.readouterr().out
    ck = load_checkpoint(tmp_path)
    assert ck.step == 2 and ck.train_config["compile"] == "on"
