"""Ship a chart parser of `pretrained/` from its training run (a translator ships with `at-evaluate RUN ... --ship NAME`).

    python tools/ship_models.py ptb-chart runs/ptb-chart-pos5 results/ptb-chart/pos5-16000

The checkpoint is RUN/best.pt (kept by dev F1), and the row is its dev F1 on all of section 22 with fp32 weights (EVALB
COLLINS.prm, CKY), measured here first. `ship` (38_shipped_models) scores the weights again as they would be stored, in
bf16, fp16 and fp32, writes `pretrained/NAME` in the smallest precision within 0.05 of the row (bf16 before fp16 at equal
size), and RESULTS/shipped.json records every score: the same step `at-evaluate --ship` takes for a translator.
"""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.engine.loading import load_model
from annotated_transformer.training.data import atomic_write, default_data_dir
from annotated_transformer.engine.runs import source_commit
from annotated_transformer.engine.shipped_models import ship
from annotated_transformer.parsing.chart_choices import decoding_sums
from annotated_transformer.parsing.evalb import bracket_prf
from annotated_transformer.parsing.trees import ptb_trees


def chart_dev_f1(ck, trees) -> float:
    "Dev F1 (EVALB COLLINS.prm, CKY on the model's own scores) of a chart parser checkpoint."
    model, vocab = load_model(ck, "at-parse")
    m, g, t, _ = decoding_sums([model], vocab, trees, {"cky": lambda ss: ss[0]})["cky"].tolist()
    return bracket_prf(m, g, t)["f1"]

def _run_record(run: Path) -> tuple[dict, float]:
    "run.json of a training run, and its seconds in the trainer (the last metrics line's train_s)."
    info = json.loads((run / "run.json").read_text())
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    return info, max(r.get("train_s", 0) for r in rows)

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the shipped model's name, e.g. ptb-chart")
    ap.add_argument("run", type=Path, help="the chart parser's training run directory (at-train ptb-chart --run-dir)")
    ap.add_argument("results", type=Path, help="its results directory: shipped.json, metrics.jsonl and run.json are written there")
    ap.add_argument("--data-dir", default=None, help="the corpora (default: the package's data directory)")
    a = ap.parse_args(argv)
    ck = load_checkpoint(a.run / "best.pt")
    load_model(ck, "at-parse")  # a parser's checkpoint, or one line saying what it holds (translators: at-evaluate --ship)
    trees = ptb_trees("dev", Path(a.data_dir) if a.data_dir else default_data_dir())
    row = chart_dev_f1(ck, trees)  # the row: the fp32 weights' dev F1
    info, train_s = _run_record(a.run)
    a.results.mkdir(parents=True, exist_ok=True)
    for f in ("metrics.jsonl", "run.json"): atomic_write(a.results / f, (a.run / f).read_text())  # the curve; no treebank words
    reproduces = dict(metric=f"bracket F1, EVALB COLLINS.prm, all {len(trees)} sentences of section 22 (dev), CKY", value=row)
    provenance = dict(run=str(a.run), results=str(a.results / "shipped.json"), checkpoint="best.pt (the best dev F1 of the run)",
                      command=info["command"], resumed=[r["command"] for r in info.get("resumed", [])], steps=ck.step,
                      hardware=info["hardware"], train_s=round(train_s, 1), commit=source_commit(), reproduces=reproduces)
    record = ship(ck, a.name, lambda c: chart_dev_f1(c, trees), row, "f1", provenance, a.results, log=lambda m: print(m, flush=True))
    print(f"wrote {record['shipped']} ({record['bytes'] / 1e6:.1f} MB, {record['stored']}); {a.results / 'shipped.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
