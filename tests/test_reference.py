"""Is my run normal? The presets' measured runs ship as reference curves; at-train prints the reference's loss beside a reader's
run of the same task and size, and `plot_reference` draws the reader's run over it."""
import json, subprocess, sys
from pathlib import Path
import pytest
from annotated_transformer.commands.cli import train_main
from annotated_transformer.engine.runs import find_reference, reference_match, reference_note, plot_reference, reference_dir
from annotated_transformer.engine.tasks import task_preset

REPO = Path(__file__).resolve().parents[1]


def test_shipped_curves_are_what_their_runs_wrote():
    "Each curve is rebuilt from its results/ files by the tool that wrote it: no number is typed in."
    r = subprocess.run([sys.executable, str(REPO / "tools" / "reference_curves.py"), "check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    names = sorted(p.stem for p in reference_dir().glob("*.json"))
    assert names == ["copy", "multi30k-de-en", "multi30k-en-de", "multi30k-fr-en", "ptb-chart"]
    assert sum(p.stat().st_size for p in reference_dir().glob("*.json")) < 200_000  # small enough to ship


@pytest.mark.parametrize("task,langs,name", [("copy", {}, "copy"), ("multi30k", {}, "multi30k-de-en"),
                                             ("multi30k", dict(src_lang="en", tgt_lang="de"), "multi30k-en-de"),
                                             ("ptb-chart", {}, "ptb-chart"),
                                             ("translate", dict(src_lang="fr", tgt_lang="en"), "multi30k-fr-en")])
def test_a_preset_finds_its_reference(task, langs, name):
    m, t, d = task_preset(task)
    for k, v in langs.items(): setattr(d, k, v)
    ref = find_reference(reference_match(task, m, t, d))
    assert ref is not None and ref["name"] == name and len(ref["steps"]) == len(ref["loss"]) > 10
    assert ref["cpu"] and ref["train_s"] > 0
    if task != "copy":  # a validation score beside the loss: BLEU for a translator, dev F1 for the parser
        assert ref["score"] in ("val_bleu", "val_f1") and 30 < ref["scores"][-1] < 95 and ref["score_steps"][-1] == ref["steps"][-1]
    t.max_tokens //= 2  # another batch: another curve, none shipped
    assert find_reference(reference_match(task, m, t, d)) is None


def test_reference_note_reads_the_last_step_up_to_now():
    ref = dict(steps=[10, 20, 30], loss=[3.0, 2.5, 2.0])
    assert reference_note(ref, 25) == "(reference run: 2.500 at step 20)"
    assert reference_note(ref, 5) == "" and reference_note(None, 20) == ""


def test_a_copy_run_prints_the_reference_and_plots_over_it(tmp_path, cli):
    r = cli(train_main, "copy", "--max-steps", "100", "--run-dir", tmp_path / "run", "--no-progress", "--precision", "fp32",
            "--device", "cpu")
    assert r.returncode == 0, r.stderr
    ref = find_reference(reference_match("copy", *task_preset("copy")))
    lines = [l for l in r.stdout.splitlines() if l.startswith("step ")]
    assert lines == [f"step {s}: loss {l.split()[3]} {reference_note(ref, s)}" for s, l in zip((50, 100), lines)], lines
    assert "reference run: copy (results/copy-at-train)" in r.stdout
    fig = plot_reference(tmp_path / "run", ref)
    labels = [l.get_label() for l in fig.axes[0].get_lines()]
    assert "this run: train" in labels and any(l.startswith("reference: train") for l in labels)


def test_a_parser_curve_has_its_dev_f1_and_a_lever_has_no_reference(tmp_path):
    "The chart parser logs dev F1, not a validation loss: the curve keeps it, and the plot draws it on its own axis."
    m, t, d = task_preset("ptb-chart")
    ref = find_reference(reference_match("ptb-chart", m, t, d))
    assert ref["score"] == "val_f1" and ref["val_steps"] == [] and len(ref["scores"]) == len(ref["score_steps"]) > 10
    assert 85 < max(ref["scores"]) < 95
    m.tag_loss = 5.0  # the tagging-loss lever changes the loss it logs: not the preset's curve
    assert find_reference(reference_match("ptb-chart", m, t, d)) is None
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [dict(step=25, loss=2500.0, time=1.0), dict(step=50, loss=1400.0, time=2.0),
                                                          dict(step=50, val_f1=40.0, time=3.0)]))
    fig = plot_reference(log, ref)
    labels = [l.get_label() for ax in fig.axes for l in ax.get_lines()]
    assert {"this run: train", "this run: val_f1", "reference: val_f1"} <= set(labels)
