"""Make the shipped translation models of `pretrained/` from their training runs, and measure what the stored precision costs.

    python tools/ship_models.py multi30k-de-en runs/multi30k-de-en results/multi30k-de-en
    python tools/ship_models.py multi30k-en-de runs/multi30k-en-de results/multi30k-en-de

For a run that `at-evaluate` scored into RESULTS/results.json, this takes the checkpoint that results.json chose (`last`, or the
average of the last n), scores test2016 with its weights in fp32 and in bf16 (beam 4, alpha 0.6, as the row), writes the shipped
directory `pretrained/NAME` in the smallest precision within 0.05 BLEU of the row (half the 0.1 that the shipped models' test
allows, leaving the other half for another CPU's rounding), and records both scores in RESULTS/shipped.json. The logic is the package's: `checkpoint_candidates`, `write_shipped`, `score_corpus`.
"""
from __future__ import annotations
import argparse, json, subprocess, sys, time
from pathlib import Path
import torch
from annotated_transformer.checkpoint import CheckpointError, write_shipped
from annotated_transformer.data import atomic_write, load_recipe
from annotated_transformer.evaluation import checkpoint_candidates, score_corpus
from annotated_transformer.inference import load_translator
from annotated_transformer.shipped import shipped_dir

MARGIN = 0.05  # BLEU: the stored precision must reproduce the row this closely

def chosen_checkpoint(run: Path, res: dict):
    "The checkpoint (or average) that results.json chose, as at-evaluate made its candidates (`checkpoint_candidates`)."
    n = 1 if res["chosen"] == "last" else int(res["chosen"].removeprefix("avg"))
    ck = checkpoint_candidates(run, (n,))[res["chosen"]]
    if ck.step != res["selection"][res["chosen"]]["step"]:
        raise CheckpointError(f"{run}: its last checkpoint is not the step {res['selection'][res['chosen']]['step']} that results.json scored")
    return ck

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the shipped model's name, e.g. multi30k-de-en")
    ap.add_argument("run", type=Path, help="its training run directory (at-train --run-dir)")
    ap.add_argument("results", type=Path, help="the directory where at-evaluate wrote its results.json")
    ap.add_argument("--data-dir", default=None, help="the corpora (default: the package's data directory)")
    a = ap.parse_args(argv)
    res = json.loads((a.results / "results.json").read_text())
    src, tgt = res["direction"].split("-")
    ck = chosen_checkpoint(a.run, res)
    test = load_recipe("multi30k", "test", a.data_dir, src_lang=src, tgt_lang=tgt)
    row = res["test_beam"]["bleu"]
    scores = {}
    for dtype in (torch.bfloat16, torch.float32):  # smallest first
        model, tok = load_translator(ck)
        for p in model.parameters(): p.data = p.data.to(dtype).float()  # the weights as they would be stored
        t0 = time.perf_counter()
        r = score_corpus(model, tok, test, beam_size=res["test_beam"]["beam_size"], alpha=res["test_beam"]["alpha"])
        scores[str(dtype).removeprefix("torch.")] = dict(bleu=r["bleu"], seconds=round(time.perf_counter() - t0, 1))
        print(f"{a.name}: test2016 BLEU {r['bleu']:.2f} with {dtype} weights (the row: {row:.2f})", flush=True)
    dtype = next((d for d in (torch.bfloat16, torch.float32) if abs(scores[str(d).removeprefix("torch.")]["bleu"] - row) <= MARGIN), None)
    if dtype is None: raise SystemExit(f"{a.name}: no stored precision reproduces the row within {MARGIN} BLEU: {scores}")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    provenance = dict(run=str(a.run), results=str(a.results / "results.json"), command=res["command"], chosen=res["chosen"],
                      steps=res["steps"], hardware=res["hardware"], train_wall_s=res["training"]["train_wall_s"], commit=commit,
                      reproduces=dict(metric="sacreBLEU (test2016, beam 4, alpha 0.6)", value=row, direction=res["direction"]))
    out = write_shipped(ck, shipped_dir() / a.name, provenance, dtype)
    record = dict(name=a.name, stored=str(dtype).removeprefix("torch."), rule=f"the smallest precision within {MARGIN} BLEU of the row", row_bleu=row, scores=scores,
                  bytes=sum(p.stat().st_size for p in out.iterdir()), shipped=str(out.relative_to(shipped_dir().parent)))
    atomic_write(a.results / "shipped.json", json.dumps(record, indent=1) + "\n")
    print(f"wrote {out} ({record['bytes'] / 1e6:.1f} MB, {record['stored']}); {a.results / 'shipped.json'}")
    return 0

if __name__ == "__main__": sys.exit(main())
