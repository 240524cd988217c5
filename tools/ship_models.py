"""Make the shipped models of `pretrained/` from their training runs, and measure what the stored precision costs.

    python tools/ship_models.py multi30k-de-en runs/multi30k-de-en results/multi30k-de-en
    python tools/ship_models.py multi30k-en-de runs/multi30k-en-de results/multi30k-en-de
    python tools/ship_models.py ptb-chart runs/ptb-chart-pos5 results/ptb-chart/pos5-16000

A translation run: RESULTS/results.json is what `at-evaluate` wrote; the checkpoint is the one it chose (`last`, or the average of
the last n) and the row is its test2016 BLEU (beam 4, alpha 0.6). A chart parser run: the checkpoint is RUN/best.pt (kept by dev F1)
and the row is its dev F1 on all of section 22 with fp32 weights (EVALB COLLINS.prm, CKY), measured here first.
Each run's weights are scored again as they would be stored, in bf16, fp16 and fp32; the shipped directory `pretrained/NAME` takes
the smallest precision within 0.05 of the row (half the 0.1 that the shipped models' tests allow, leaving the other half for another
CPU's rounding; bf16 before fp16 at equal size), and RESULTS/shipped.json records every score. The logic is the package's:
`checkpoint_candidates`, `write_shipped`, `score_corpus`, `decoding_sums`.
"""
from __future__ import annotations
import argparse, json, subprocess, sys, time
from pathlib import Path
import torch
from annotated_transformer.checkpoint import CheckpointError, load_checkpoint
from annotated_transformer.data import atomic_write, load_recipe
from annotated_transformer.evaluation import checkpoint_candidates, load_translator
from annotated_transformer.translation import score_corpus
from annotated_transformer.shipped import shipped_dir, write_shipped

MARGIN = 0.05  # BLEU or F1: the stored precision must reproduce the row this closely
PRECISIONS = (torch.bfloat16, torch.float16, torch.float32)  # smallest first; bf16 before fp16 at the same size

def chosen_checkpoint(run: Path, res: dict):
    "The checkpoint (or average) that results.json chose, as at-evaluate made its candidates (`checkpoint_candidates`)."
    n = 1 if res["chosen"] == "last" else int(res["chosen"].removeprefix("avg"))
    ck = checkpoint_candidates(run, (n,))[res["chosen"]]
    if ck.step != res["selection"][res["chosen"]]["step"]:
        raise CheckpointError(f"{run}: its last checkpoint is not the step {res['selection'][res['chosen']]['step']} that results.json scored")
    return ck

def as_stored(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    "The model with its weights rounded to `dtype` and back to fp32, as a shipped directory gives them."
    for p in model.parameters(): p.data = p.data.to(dtype).float()
    return model

def _name(dtype: torch.dtype) -> str: return str(dtype).removeprefix("torch.")

def translation_scores(ck, a, res: dict) -> tuple[float, dict, dict]:
    "The row (test2016 BLEU of results.json), each precision's BLEU, and what the row reproduces."
    src, tgt = res["direction"].split("-")
    test = load_recipe("multi30k", "test", a.data_dir, src_lang=src, tgt_lang=tgt)
    row, scores = res["test_beam"]["bleu"], {}
    for dtype in PRECISIONS:
        model, tok = load_translator(ck)
        t0 = time.perf_counter()
        r = score_corpus(as_stored(model, dtype), tok, test, beam_size=res["test_beam"]["beam_size"], alpha=res["test_beam"]["alpha"])
        scores[_name(dtype)] = dict(bleu=r["bleu"], seconds=round(time.perf_counter() - t0, 1))
        print(f"{a.name}: test2016 BLEU {r['bleu']:.2f} with {dtype} weights (the row: {row:.2f})", flush=True)
    return row, scores, dict(metric="sacreBLEU (test2016, beam 4, alpha 0.6)", value=row, direction=res["direction"])

def chart_dev_f1(ck, dtype: torch.dtype, trees) -> float:
    "Dev F1 (EVALB COLLINS.prm, CKY on the model's own scores) of a chart parser checkpoint with its weights stored in `dtype`."
    from annotated_transformer.parsing_runs import parser_of
    from annotated_transformer.chart_choices import decoding_sums
    from annotated_transformer.evalb import bracket_prf
    model, vocab = parser_of(ck)
    m, g, t, _ = decoding_sums([as_stored(model, dtype)], vocab, trees, {"cky": lambda ss: ss[0]})["cky"].tolist()
    return bracket_prf(m, g, t)["f1"]

def chart_scores(ck, a) -> tuple[float, dict, dict]:
    "The row (dev section-22 F1 of the fp32 weights), each precision's F1, and what the row reproduces."
    from annotated_transformer.trees import ptb_trees
    from annotated_transformer.data import default_data_dir
    trees = ptb_trees("dev", Path(a.data_dir) if a.data_dir else default_data_dir())
    scores = {}
    for dtype in reversed(PRECISIONS):  # fp32 first: the row
        t0 = time.perf_counter()
        scores[_name(dtype)] = dict(f1=chart_dev_f1(ck, dtype, trees), seconds=round(time.perf_counter() - t0, 1))
        print(f"{a.name}: dev F1 {scores[_name(dtype)]['f1']:.2f} with {dtype} weights", flush=True)
    row = scores["float32"]["f1"]
    return row, scores, dict(
        metric=f"bracket F1, EVALB COLLINS.prm, all {len(trees)} sentences of section 22 (dev), CKY", value=row)

def _run_record(run: Path) -> tuple[dict, float]:
    "run.json of a training run, and its seconds in the trainer (the last metrics line's train_s)."
    info = json.loads((run / "run.json").read_text())
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    return info, max(r.get("train_s", 0) for r in rows)

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the shipped model's name, e.g. multi30k-de-en or ptb-chart")
    ap.add_argument("run", type=Path, help="its training run directory (at-train --run-dir)")
    ap.add_argument("results", type=Path, help="where its results are: at-evaluate's results.json for a translation run; shipped.json is written there")
    ap.add_argument("--data-dir", default=None, help="the corpora (default: the package's data directory)")
    a = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if load_checkpoint(a.run).kind == "chart":
        ck = load_checkpoint(a.run / "best.pt")
        row, scores, reproduces = chart_scores(ck, a)
        info, train_s = _run_record(a.run)
        a.results.mkdir(parents=True, exist_ok=True)
        for f in ("metrics.jsonl", "run.json"): atomic_write(a.results / f, (a.run / f).read_text())  # the curve; no treebank words
        provenance = dict(run=str(a.run), results=str(a.results / "shipped.json"), checkpoint="best.pt (the best dev F1 of the run)", command=info["command"],
                          resumed=[r["command"] for r in info.get("resumed", [])], steps=ck.step, hardware=info["hardware"],
                          train_s=round(train_s, 1), commit=commit, reproduces=reproduces)
        key = "f1"
    else:
        res = json.loads((a.results / "results.json").read_text())
        ck = chosen_checkpoint(a.run, res)
        row, scores, reproduces = translation_scores(ck, a, res)
        provenance = dict(run=str(a.run), results=str(a.results / "results.json"), command=res["command"], chosen=res["chosen"],
                          steps=res["steps"], hardware=res["hardware"], train_wall_s=res["training"]["train_wall_s"], commit=commit,
                          reproduces=reproduces)
        key = "bleu"
    dtype = next((d for d in PRECISIONS if abs(scores[_name(d)][key] - row) <= MARGIN), None)
    if dtype is None: raise SystemExit(f"{a.name}: no stored precision reproduces the row within {MARGIN}: {scores}")
    out = write_shipped(ck, shipped_dir() / a.name, provenance, dtype)
    record = dict(name=a.name, stored=_name(dtype), rule=f"the smallest precision within {MARGIN} of the row (bf16 before fp16)",
                  row=row, metric=reproduces["metric"], scores=scores, bytes=sum(p.stat().st_size for p in out.iterdir()),
                  shipped=str(out.relative_to(shipped_dir().parent)))
    a.results.mkdir(parents=True, exist_ok=True)
    atomic_write(a.results / "shipped.json", json.dumps(record, indent=1) + "\n")
    print(f"wrote {out} ({record['bytes'] / 1e6:.1f} MB, {record['stored']}); {a.results / 'shipped.json'}")
    return 0

if __name__ == "__main__": sys.exit(main())
