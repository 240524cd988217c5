"""Table 3 variations: the row mapping (every row of the paper present, A keeps h*d_k constant, scaled configs valid,
parameter counts move the paper's way), and the grid's CSV writer / resume on a tiny grid."""
import csv, json, os, subprocess, sys
from annotated_transformer.commands.experiments import variations_main
from dataclasses import replace
from pathlib import Path
import pytest
import torch
from annotated_transformer.architecture.model import make_model, count_parameters
from annotated_transformer.engine.runs import read_metrics
from annotated_transformer.engine import grid as V
from annotated_transformer.translation.variations import PAPER_TABLE3, PAPER_BASE, ROWS, paper_config, scale_config, row_config, mapping_table, read_table, CSV_FIELDS
from annotated_transformer.engine.grid import GridSettings, run_grid, run_record, run_hardware

REPO = Path(__file__).resolve().parents[1]

# The rows of the paper's Table 3, as (group, settings that differ from base): an independent list to check against.
PAPER_ROWS = [("base", {}),
              ("A", dict(n_heads=1, d_k=512)), ("A", dict(n_heads=4, d_k=128)), ("A", dict(n_heads=16, d_k=32)),
              ("A", dict(n_heads=32, d_k=16)),
              ("B", dict(d_k=16)), ("B", dict(d_k=32)),
              ("C", dict(n_layers=2)), ("C", dict(n_layers=4)), ("C", dict(n_layers=8)),
              ("C", dict(d_model=256, d_k=32)), ("C", dict(d_model=1024, d_k=128)),
              ("C", dict(d_ff=1024)), ("C", dict(d_ff=4096)),
              ("D", dict(dropout=0.0)), ("D", dict(dropout=0.2)), ("D", dict(label_smoothing=0.0)),
              ("D", dict(label_smoothing=0.2)),
              ("E", dict(positional="learned")),
              ("big", dict(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3))]


def test_every_paper_row_present():
    got = [(r.group, {k: v for k, v in paper_config(r).items() if PAPER_BASE[k] != v}) for r in PAPER_TABLE3]
    assert got == PAPER_ROWS
    assert len(ROWS) == len(PAPER_TABLE3)  # names unique
    assert ROWS["big"].steps_factor == 3.0 and ROWS["base"].params_m == 65


@pytest.mark.parametrize("width,depth", [(4, 2), (8, 2), (2, 1)])
def test_row_a_keeps_computation_constant(width, depth):
    base = row_config("base", 1000, width, depth)
    for r in PAPER_TABLE3:
        if r.group != "A": continue
        cfg = row_config(r, 1000, width, depth)
        assert cfg.n_heads * cfg.head_dim == cfg.d_model == base.d_model
        assert count_parameters(make_model(cfg)) == count_parameters(make_model(base))


def test_scaling_rule():
    s = scale_config(paper_config(ROWS["C d_model=1024"]), width=4, depth=2)
    assert (s["d_model"], s["d_k"], s["d_ff"], s["n_layers"], s["n_heads"]) == (256, 32, 512, 3, 8)
    assert scale_config(PAPER_BASE, 1, 1) == PAPER_BASE
    with pytest.raises(ValueError, match="not divisible"): scale_config(PAPER_BASE, width=3)
    with pytest.raises(ValueError, match="not divisible"): scale_config(PAPER_BASE, depth=4)  # N=6
    assert row_config("E learned pos", 1000).positional == "learned"
    assert row_config("D eps_ls=0.2", 1000).label_smoothing == 0.2


def test_scaled_configs_valid_and_param_counts_move_the_papers_way():
    rows = {r["row"]: r for r in mapping_table(width=4, depth=2, vocab_size=8000, norm_first=True, max_len=256)}
    for r in PAPER_TABLE3:  # each builds and runs a forward pass
        cfg = row_config(r, 50, norm_first=True, max_len=32)
        model = make_model(cfg).eval()
        out = model(torch.randint(3, 50, (2, 7)), torch.randint(3, 50, (2, 5)))
        assert out.shape == (2, 5, 50)
    base = rows["base"]["our_params_m"]
    for r in PAPER_TABLE3:
        if r.params_m is None or r.name == "base": continue
        assert (rows[r.name]["our_params_m"] > base) == (r.params_m > ROWS["base"].params_m), r.name
    # and the ordering within each sweep agrees with the paper's
    for names in (["C N=2", "C N=4", "base", "C N=8"], ["B d_k=16", "B d_k=32", "base"],
                  ["C d_model=256", "base", "C d_model=1024", "big"], ["C d_ff=1024", "base", "C d_ff=4096"]):
        ours = [rows[n]["our_params_m"] for n in names]
        assert ours == sorted(ours) and len(set(ours)) == len(ours), names


TINY = GridSettings(steps=3, max_tokens=512, vocab_size=400, width=16, depth=2, n_train=200, n_valid=8, beam_size=2)


def test_grid_csv_and_resume(shared_data, tmp_path):
    out = tmp_path / "grid"
    got = run_grid(["base"], TINY, out, data_dir=str(shared_data), log=lambda m: None)
    assert [r["row"] for r in got] == ["base"]
    header = next(csv.reader(open(out / "table3.csv")))
    assert header == CSV_FIELDS
    assert (out / "metrics" / "base-seed0.jsonl").is_file() and (out / "tokenizer" / "spm.model").is_file()
    assert not (out / "runs").exists()  # scratch checkpoints removed
    tok_mtime = (out / "tokenizer" / "spm.model").stat().st_mtime
    # resume: base is skipped (its line unchanged), the new row is appended, with the same tokenizer
    got2 = run_grid(["base", "C N=2"], TINY, out, data_dir=str(shared_data), log=lambda m: None)
    assert [r["row"] for r in got2] == ["base", "C N=2"]
    assert got2[0] == got[0]
    assert (out / "tokenizer" / "spm.model").stat().st_mtime == tok_mtime
    r = got2[1]
    assert r["steps"] == 3 and r["n_layers"] == 1 and r["params"] < got2[0]["params"]
    assert r["dev_ppl"] > 1 and r["paper_ppl"] == 6.11 and r["paper_params_m"] == 36
    assert len(open(out / "table3.csv").read().splitlines()) == 3
    # a grid that is complete trains nothing; another budget in the same directory is refused
    assert run_grid(["C N=2"], TINY, out, data_dir=str(shared_data), log=lambda m: None) == got2
    with pytest.raises(ValueError, match="other settings"):
        run_grid(["base"], replace(TINY, steps=4), out, data_dir=str(shared_data))
    assert json.loads((out / "settings.json").read_text())["steps"] == 3
    # each run's machine is kept beside its metrics
    rec = json.loads(run_record(out, "C N=2", 0).read_text())
    assert rec["hardware"]["cpu"] and rec["precision"] in ("fp32", "bf16") and rec["compile"] == "off"
    assert run_hardware(out, "C N=2", 0) == rec["hardware"] and run_hardware(out, "C N=4", 0) is None  # a run it has no record of


def test_a_grid_may_span_devices_not_recipes(shared_data, tmp_path):
    "Where a run trains is not its recipe: a grid begun on one device continues on another; its settings.json keeps the first."
    out = tmp_path / "grid"
    run_grid(["base"], replace(TINY, device="cuda"), out, data_dir=str(shared_data), log=lambda m: None) if torch.cuda.is_available() \
        else run_grid(["base"], TINY, out, data_dir=str(shared_data), log=lambda m: None)
    first = json.loads((out / "settings.json").read_text())
    other = "cpu" if first["device"] == "cuda" else "auto"  # auto is the CPU here: the check, not the device, is under test
    got = run_grid(["base", "C N=2"], replace(TINY, device=other), out, data_dir=str(shared_data), log=lambda m: None)
    assert [r["row"] for r in got] == ["base", "C N=2"]
    assert json.loads((out / "settings.json").read_text()) == first
    assert json.loads(run_record(out, "C N=2", 0).read_text())["hardware"]["cpu"]
    with pytest.raises(ValueError, match="other settings.*precision"):  # the recipe still may not change
        run_grid(["C N=4"], replace(TINY, device=other, precision="bf16"), out, data_dir=str(shared_data))


def test_unknown_row(tmp_path):
    with pytest.raises(ValueError, match="unknown Table 3 rows"): run_grid(["F"], TINY, tmp_path)


def test_cli(shared_data, tmp_path, cli):
    args = ["--rows", "C N=2", "--out", tmp_path / "g", "--data_dir", shared_data, "--steps", "2", "--max_tokens", "512",
            "--vocab_size", "400", "--width", "16", "--n_train", "200", "--n_valid", "8", "--beam_size", "1", "--no-norm_first"]
    r = cli(variations_main, *args)
    assert r.returncode == 0, r.stderr
    rows = read_table(tmp_path / "g")
    assert [r["row"] for r in rows] == ["C N=2"] and rows[0]["steps"] == 2
    assert json.loads((tmp_path / "g" / "settings.json").read_text())["norm_first"] is False
    bad = cli(variations_main, "--out", tmp_path / "h", "--rows", "nope")
    assert bad.returncode == 2 and "unknown rows ['nope']" in bad.stderr and "Traceback" not in bad.stderr


def test_interrupted_row_is_not_written(shared_data, tmp_path, monkeypatch):
    "A row whose training a signal stopped must not reach the CSV (a resumed grid retrains it)."
    from annotated_transformer.engine import grid as V
    monkeypatch.setattr(V.Trainer, "fit", lambda self: dict(stopped_by="SIGTERM", step=1))
    with pytest.raises(KeyboardInterrupt, match="stopped by SIGTERM"):
        run_grid(["base"], TINY, tmp_path, data_dir=str(shared_data), log=lambda m: None)
    assert not (tmp_path / "table3.csv").exists()


def _stop_at(monkeypatch, step: int):
    "Send this process SIGINT once the trainer logs `step`, as Ctrl-C would: the trainer saves there and stops."
    import os, signal
    from annotated_transformer.engine import grid as V
    log = V.Trainer._log
    def log_then_stop(self, record):
        log(self, record)
        if record.get("step") == step and "loss" in record: os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(V.Trainer, "_log", log_then_stop)


def test_interrupted_row_continues_where_it_stopped(shared_data, tmp_path, monkeypatch, capsys):
    "A row stopped by a signal in the middle (step 3 or 4 of 6) continues from there when run again, and ends exactly as an uninterrupted row."
    from annotated_transformer.engine.grid import prepare_data, train_row, ROWS
    s = replace(TINY, steps=6, precision="fp32")
    data = prepare_data(tmp_path / "grid", s.vocab_size, str(shared_data), s.n_train, s.n_valid, s.max_len)
    whole = train_row(ROWS["base"], data, s, tmp_path / "whole")
    assert "compile off (as asked)" in capsys.readouterr().out  # grid rows train eager on every machine, with no compile trial
    with monkeypatch.context() as m:
        _stop_at(m, 3)
        with pytest.raises(KeyboardInterrupt, match=r"stopped by SIGINT at step [34] of 6"): train_row(ROWS["base"], data, s, tmp_path / "cut")
    assert [p.name for p in (tmp_path / "cut").glob("ckpt_*.pt")] in (["ckpt_0000003.pt"], ["ckpt_0000004.pt"])  # saved at the stop
    capsys.readouterr()
    again = train_row(ROWS["base"], data, s, tmp_path / "cut")
    assert "resumed from" in capsys.readouterr().out  # continued, not trained again from the start
    assert again["steps"] == 6
    for k in ("dev_ppl", "dev_nll", "dev_bleu", "final_train_loss", "params"): assert again[k] == whole[k], k
    # its training time is the trainer's clock over both parts, as the metrics' last record has it (not the gaps between records)
    assert again["train_seconds"] == round(read_metrics(tmp_path / "cut")[-1]["train_s"], 1) > 0


def test_resumed_row_stopped_before_its_first_record(shared_data, tmp_path, monkeypatch):
    """A row resumed from a checkpoint and stopped again before it logged anything (no metrics.jsonl yet: a grid of 8,000 steps logs
    every 400) is reported as stopped, not as a FileNotFoundError from reading its training time."""
    from annotated_transformer.engine import grid as V
    s = replace(TINY, steps=6, precision="fp32")
    data = V.prepare_data(tmp_path / "grid", s.vocab_size, str(shared_data), s.n_train, s.n_valid, s.max_len)
    with monkeypatch.context() as m:
        _stop_at(m, 2)
        with pytest.raises(KeyboardInterrupt): V.train_row(ROWS["base"], data, s, tmp_path / "cut")
    (tmp_path / "cut" / "metrics.jsonl").unlink()  # as if the first part had stopped before its first record
    monkeypatch.setattr(V.Trainer, "fit", lambda self: dict(stopped_by="SIGTERM", step=self.step))
    with pytest.raises(KeyboardInterrupt, match=r"stopped by SIGTERM at step [23] of 6"): V.train_row(ROWS["base"], data, s, tmp_path / "cut")
    assert list((tmp_path / "cut").glob("ckpt_*.pt"))  # its checkpoint is kept for the next resume

def test_grid_keeps_an_unfinished_row(shared_data, tmp_path, monkeypatch, capsys):
    "run_grid stopped in the middle of a row continues that row's run directory when run again, instead of deleting it."
    out, s = tmp_path / "grid", replace(TINY, steps=6, precision="fp32")
    with monkeypatch.context() as m:
        _stop_at(m, 3)
        with pytest.raises(KeyboardInterrupt): run_grid(["base"], s, out, data_dir=str(shared_data), log=lambda m: None)
    assert len(list((out / "runs" / "base-seed0").glob("ckpt_*.pt"))) == 1 and not (out / "table3.csv").exists()
    capsys.readouterr()
    got = run_grid(["base"], s, out, data_dir=str(shared_data), log=lambda m: None)
    assert "resumed from" in capsys.readouterr().out
    assert got[0]["steps"] == 6 and not (out / "runs").exists()
    steps = [r["step"] for r in read_metrics(out / "metrics" / "base-seed0.jsonl") if "loss" in r]
    assert steps == sorted(set(steps)) and steps[0] == 1 and steps[-1] == 6  # one record per step: the first part's kept, none twice


def test_seeds_side_by_side_equal_one_at_a_time(shared_data, tmp_path):
    "Two seeds of two rows in two worker processes: one line per (row, seed), the same numbers as the runs trained in this process."
    s = replace(TINY, steps=4, precision="fp32")
    par = run_grid(["base", "C N=2"], s, tmp_path / "par", data_dir=str(shared_data), log=lambda m: None, seeds=[0, 1], workers=2)
    assert [(r["row"], r["seed"]) for r in par] in ([("base", 0), ("base", 1), ("C N=2", 0), ("C N=2", 1)],
                                                    [("base", 1), ("base", 0), ("C N=2", 0), ("C N=2", 1)],
                                                    [("base", 0), ("base", 1), ("C N=2", 1), ("C N=2", 0)],
                                                    [("base", 1), ("base", 0), ("C N=2", 1), ("C N=2", 0)])  # in the order they finished
    by = {(r["row"], r["seed"]): r for r in par}
    assert by["base", 0]["dev_ppl"] != by["base", 1]["dev_ppl"]  # another seed: other weights and batches
    assert sorted(p.name for p in (tmp_path / "par" / "metrics").iterdir()) == sorted(
        f"{r}-seed{k}{ext}" for r in ("base", "C_N_2") for k in (0, 1) for ext in (".jsonl", ".run.json"))  # metrics and where each ran
    assert json.loads((tmp_path / "par" / "metrics" / "base-seed1.run.json").read_text())["hardware"]["torch_threads"] == 1  # a worker
    threads = torch.get_num_threads(); torch.set_num_threads(1)  # as a worker trains
    try: one = run_grid(["base", "C N=2"], s, tmp_path / "one", data_dir=str(shared_data), log=lambda m: None, seeds=[1])
    finally: torch.set_num_threads(threads)
    for r in one:
        p = by[r["row"], 1]
        for k in ("params", "steps", "dev_ppl", "dev_bleu", "final_train_loss"): assert p[k] == pytest.approx(r[k], rel=1e-4), (r["row"], k)
    # a second call finds every (row, seed) done; a new seed adds only its own lines
    assert run_grid(["base", "C N=2"], s, tmp_path / "par", data_dir=str(shared_data), log=lambda m: None, seeds=[0, 1], workers=2) == par
    with pytest.raises(ValueError, match="seeds"): run_grid(["base"], s, tmp_path / "par", seeds=[0, 0])


@pytest.mark.slow  # about 30 s: two fresh interpreters twice; the quick set has the side-by-side run of test_seeds_side_by_side_equal_one_at_a_time
def test_parallel_grid_stops_on_a_signal_and_continues(shared_data, tmp_path):
    "SIGTERM to at-variations --workers 2 reaches both workers: each saves a checkpoint; the same command again finishes both runs."
    import signal, time
    out = tmp_path / "g"
    cmd = [sys.executable, "-c", "import sys; from annotated_transformer.commands.experiments import variations_main; sys.exit(variations_main())", "--rows", "base", "--seeds", "0,1", "--workers", "2",
           "--out", str(out), "--data_dir", str(shared_data), "--steps", "400", "--max_tokens", "512", "--vocab_size", "400",
           "--width", "16", "--n_train", "200", "--n_valid", "8", "--beam_size", "1", "--precision", "fp32"]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("runs/*/metrics.jsonl"))) < 2: time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode in (130, 143), err
    assert "saved their checkpoints" in err and "Traceback" not in err, err
    assert not (out / "table3.csv").exists() or len(read_table(out)) < 2
    assert len(list(out.glob("runs/*/ckpt_*.pt"))) == 2  # both runs stopped with a checkpoint
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("resumed from") == 2 or again.stderr.count("resumed from") == 2, (again.stdout, again.stderr)
    rows = read_table(out)
    assert sorted(r["seed"] for r in rows) == [0, 1] and all(r["steps"] == 400 for r in rows)


def test_grid_refuses_a_second_writer_and_an_old_file(shared_data, tmp_path, cli):
    "A grid directory another process is running in is refused, in one line; so is a table3.csv of the older format."
    out = tmp_path / "g"
    holder = subprocess.Popen([sys.executable, "-c", f"from annotated_transformer.engine.runs import lock_run; import time; lock_run({str(out)!r}, 'at-variations'); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = cli(variations_main, "--rows", "base", "--out", out, "--data_dir", shared_data, "--steps", "2", "--vocab_size", "400",
                "--width", "16", "--n_train", "50", "--n_valid", "4")
        assert r.returncode == 1 and "in use by another run" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally: holder.kill(); holder.wait()
    old = tmp_path / "old"; old.mkdir()
    (old / "table3.csv").write_text("row,group,changed\nbase,base,-\n")
    r = cli(variations_main, "--rows", "base", "--out", old, "--data_dir", shared_data, "--steps", "2")
    assert r.returncode == 1 and "table3.csv, line 1: not the columns" in r.stderr, r.stderr


def test_a_row_stopped_while_scored_is_scored_again(shared_data, tmp_path, monkeypatch):
    "A row killed after its last step but before its BLEU was computed (its checkpoint is final) is scored when run again, not refused."
    from annotated_transformer.engine import grid as V
    s = replace(TINY, steps=4, precision="fp32")
    data = V.prepare_data(tmp_path / "grid", s.vocab_size, str(shared_data), s.n_train, s.n_valid, s.max_len)
    whole = V.train_row(ROWS["base"], data, s, tmp_path / "whole")
    score = V.score_corpus
    def interrupted(*a, **k): raise KeyboardInterrupt("stopped while scoring")
    with monkeypatch.context() as m:
        m.setattr(V, "score_corpus", interrupted)
        with pytest.raises(KeyboardInterrupt): V.train_row(ROWS["base"], data, s, tmp_path / "cut")
    again = V.train_row(ROWS["base"], data, s, tmp_path / "cut")
    for k in ("dev_ppl", "dev_nll", "dev_bleu", "final_train_loss", "steps", "params"): assert again[k] == whole[k], k


def test_a_grid_stopped_by_sigterm_exits_143_by_its_signal_not_its_message(monkeypatch, tmp_path):
    "at-variations reads which signal stopped a grid from `Stopped.signal`; it used to look for 'SIGTERM' in the message."
    from annotated_transformer.commands import experiments as cli
    def stopped(*a, **k): raise V.Stopped("2 unfinished run(s) saved their checkpoints", "SIGTERM")
    monkeypatch.setattr(cli, "run_grid", stopped)
    assert cli.variations_main(["--rows", "base", "--out", str(tmp_path / "grid"), "--device", "cpu"]) == 143
    def interrupted(*a, **k): raise V.Stopped("a worker was stopped: 1 unfinished run(s) saved their checkpoints", None)
    monkeypatch.setattr(cli, "run_grid", interrupted)
    assert cli.variations_main(["--rows", "base", "--out", str(tmp_path / "grid"), "--device", "cpu"]) == 130


def test_device_has_one_default_everywhere():
    "Every command's --device and every settings record default to 'auto' (a CUDA GPU when there is one, else the CPU)."
    from annotated_transformer.commands import cli, experiments
    from annotated_transformer.engine.config import TrainConfig
    parsers = [cli.train_argparser("copy"), cli.translate_parser(), cli.evaluate_parser(), cli.parse_parser(),
               experiments.variations_parser(), experiments.bench_parser()]
    assert [p.get_default("device") for p in parsers] == ["auto"] * len(parsers)
    assert TrainConfig().device == V.GridSettings().device == "auto"
