"""The reference curves the package ships (annotated_transformer/reference/), written from the measured runs in results/.

    python tools/reference_curves.py record RUN_DIR results/NAME   # keep a finished run's record: metrics.jsonl, run.json, config.json
    python tools/reference_curves.py write                         # every curve of REFERENCES, from its results/ directory
    python tools/reference_curves.py check                         # exit 1 if a shipped curve is not what its files give

A curve is matched to a reader's run by its task, model size, batch and schedule (`reference_match`), read from the run's own
record: results.json (at-evaluate's, for the translators), config.json (written by `record` from the run's last checkpoint),
or else the trainer's run.json, whose command line gives the configs (the chart parser's preset run, whose checkpoints are gone).
"""
from __future__ import annotations
import argparse, json, shlex, shutil, sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "annotated_transformer" / "reference"
REFERENCES = {"copy": "results/copy-at-train", "multi30k-de-en": "results/multi30k-de-en", "multi30k-en-de": "results/multi30k-en-de",
              "ptb-chart": "results/ptb-chart", "multi30k-fr-en": "results/multi30k-fr-en"}


def _langs(command: str) -> dict:
    """The --src-lang and --tgt-lang a command gave ('' where it gave none: the recipe's direction), for a record whose
    configs are stored (results.json, config.json) but not its data spec."""
    words = shlex.split(command)
    get = lambda opt: next((words[i + 1] for i, w in enumerate(words[:-1]) if w in (opt, opt.replace("-", "_"))), "")
    return dict(src_lang=get("--src-lang"), tgt_lang=get("--tgt-lang"))


def curve_of(name: str, d: Path) -> dict:
    "The reference curve of the run recorded in results directory `d`."
    from annotated_transformer.engine.runs import reference_curve, reference_match
    for f in ("results.json", "config.json", "run.json"):
        if (d / f).is_file(): rec = json.loads((d / f).read_text()); break
    task, command = rec["task"], rec["command"]
    if "model_config" in rec:
        mcfg, tcfg = SimpleNamespace(**rec["model_config"]), SimpleNamespace(**rec["train_config"])
        spec = SimpleNamespace(**_langs(command))
    else:  # only the trainer's run.json: the configs and the data spec are what its command line gives
        from annotated_transformer.commands.cli import parse_args
        _, mcfg, tcfg, spec = parse_args(shlex.split(command)[1:])
    match = reference_match(task, mcfg, tcfg, spec)
    curve = reference_curve(d, name, match, rec["hardware"], source=d.relative_to(ROOT).as_posix())
    if "selection" in rec:  # a translator logs no BLEU while it trains: at-evaluate's, of its last checkpoint
        last = rec["selection"]["last"]
        curve.update(score="val_bleu", score_steps=[last["step"]], scores=[round(last["valid_bleu"], 4)],
                     score_note=f"at-evaluate's validation BLEU of the last checkpoint ({rec['selected_by']})")
    return curve


def record(run: Path, out: Path):
    "Keep a finished at-train run's record in results/: its metrics, run.json, and the configs of its last checkpoint."
    from annotated_transformer.engine.checkpoint import load_checkpoint
    ck, info = load_checkpoint(run), json.loads((run / "run.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    for f in ("metrics.jsonl", "run.json"): shutil.copyfile(run / f, out / f)
    cfg = dict(task=info["task"], command=info["command"], hardware=info["hardware"], steps=ck.step,
               model_config=ck.model_config, train_config=ck.train_config)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("record", "write", "check"))
    ap.add_argument("paths", nargs="*", type=Path)
    a = ap.parse_args(argv)
    if a.what == "record": record(*a.paths); return 0
    stale = []
    for name, src in REFERENCES.items():
        text = json.dumps(curve_of(name, ROOT / src)) + "\n"
        p = OUT / f"{name}.json"
        if a.what == "write": OUT.mkdir(exist_ok=True); p.write_text(text); print(f"wrote {p} ({len(text):,} bytes)")
        elif not p.is_file() or p.read_text() != text: stale.append(p.name)
    if stale: print(f"stale reference curves (python tools/reference_curves.py write): {stale}"); return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
