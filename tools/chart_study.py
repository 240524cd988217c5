"""The measurements of 20_chart_parser on WSJ, each written to a file under results/ptb-chart/ (the notebook reads them).

    python tools/chart_study.py dev RUN          # dev22.json: EVALB on section 22 of RUN/best.pt; trees to runs/ptb-chart-eval/;
                                                 # RUN's metrics.jsonl and run.json copied beside it (the learning curve)
    python tools/chart_study.py average RUN      # averaging.json: dev F1 of best.pt and of averages of the last 2, 4, 8 checkpoints
    python tools/chart_study.py fit RUN          # fit.json: F1 and loss on 1700 training trees against section 22 (how far it overfits)
    python tools/chart_study.py example RUN      # chart_example.json: one section-22 sentence's span scores and its CKY tree
    python tools/chart_study.py seq2seq-trees    # the sequence-to-sequence parser's best dev trees, re-made for breakdown
    python tools/chart_study.py breakdown        # breakdown.json: F1 per label and per length, both parsers, section 22
    python tools/chart_study.py speed RUN        # speed.json: sentences per second, both parsers, same sentences, same CPU
    python tools/chart_study.py test23 RUN       # test23.pred.txt and test23.json: the blind parse of section 23's words
    python tools/chart_study.py experiments      # experiments.csv: dev F1 during the short WSJ runs of EXPERIMENTS
    python tools/chart_study.py step-speed       # step_speed.json: the preset's training step, fast paths against readable ones
    python tools/chart_study.py decode RUN OTHER # decoding.json: dev F1 of decoding choices on RUN's span scores, and RUN with OTHER averaged
    python tools/chart_study.py ensemble RUN...  # ensemble.json: dev F1 of each of two or more runs alone, of every pair, and of all together
    python tools/chart_study.py test23-ensemble RUN...  # test23-ensemble.pred.txt and .json: section 23 parsed blind by an ensemble

ensemble, test23 and test23-ensemble take --out NAME.json after their runs: another file under results/ptb-chart/ than their own (and,
for the two test23 commands, NAME.pred.txt beside it), so that the files the notebooks cite stay as they are.

RUN (and OTHER) is a run directory (its best.pt is used) or, for every command but average, a checkpoint file such as the average that
`average` chose. Predicted trees of section 22 hold the treebank's words (LDC): they stay under runs/, out of the repository. Section 23 has
no gold trees here: nothing is tuned or chosen on it.
"""
import hashlib, json, os, sys, time
from pathlib import Path
import torch
from annotated_transformer.parsing.parser import parse_gold
from annotated_transformer.engine.parsing_runs import evaluate_decoding, read_sentences
from annotated_transformer.engine.loading import load_model
from annotated_transformer.engine.kinds import kind_of_model
from annotated_transformer.parsing.trees import ptb_trees, read_trees
from annotated_transformer.parsing.evalb import evalb, evalb_breakdown, with_tags
from annotated_transformer.engine.checkpoint import CheckpointError, load_checkpoint
from annotated_transformer.training.data import atomic_write
from annotated_transformer.engine.runs import hardware

DATA = Path("../shared/data")
OUT = Path("results/ptb-chart")
TREES = Path("runs/ptb-chart-eval")
SEQ2SEQ = Path("../shared/models/ptb-small-h100/checkpoint.pt")  # the paper's method, trained on a GPU (its MANIFEST.md)
def parse(model, vocab, sentences, **kw):
    "Either parser's (tree, repairs) pairs, as its model kind decodes them (at-parse does the same)."
    return kind_of_model(model, vocab).run(model, vocab, sentences, **kw)

def max_words(model, vocab) -> int: return kind_of_model(model, vocab).max_input(model)

SEQ2SEQ_SOURCE = ("../shared/models/ptb-small-h100: ptb-small trained on one H100 by the project's code at 5da1a12 "
                  "(step 6244, 470 s); not a CPU run")
SEQ2SEQ_TREES = Path("runs/ptb-shared-eval")  # where tools/parsing_study.py dev writes its dev trees
SEQ2SEQ_BEST = dict(name="beam21-constrained", beam_size=21, alpha=0.3, constrained=True)  # its best dev setting (13b)

# The short WSJ comparisons (1200 steps, warm-up 400, fp32, one thread each, two runs at a time on the 2 cores):
# run directory -> (what it tries, the commit its code was at). Each ran
#   at-train ptb-chart --data-dir ../shared/data --max-steps 1200 --warmup-steps 400 --eval-every 400 --save-every 400 \
#       --precision fp32 --no-progress --run-dir runs/NAME [the option named below]
EXPERIMENTS = {
    "exp-embed-old": ("words+chars, margin; word vectors N(0, 1) times sqrt(D) (before e3521a2)", "0c81ef4"),
    "exp-embed-new": ("as exp-embed-old, with word vectors N(0, 1/D) times sqrt(D) (the package's Embeddings) and the span halves from the even and odd features", "371fbd1"),
    "exp-partitioned": ("as exp-embed-new, with --partitioned (the factored encoder)", "58a7a12"),
    "exp-span": ("as exp-embed-new, with --loss span (cross-entropy per span)", "58a7a12"),
    "exp-subwords": ("as exp-embed-new, with --word-features subwords (mean-pooled BPE pieces, no word table or characters)", "58a7a12"),
    "exp-bf16": ("as exp-embed-new, with --precision bf16 (autocast)", "58a7a12"),
    "exp-subwords-span": ("as exp-embed-new, with --word-features subwords --loss span", "58a7a12"),
    "exp-embed-new-seed1": ("exp-embed-new again with --seed 1 (the spread between two seeds)", "58a7a12"),
}

def experiments():
    "Dev F1 at each evaluation of the comparison runs, with their training time, into one CSV."
    import csv, io
    from annotated_transformer.engine.runs import read_metrics, read_run_info
    rows = []
    for name, (what, commit) in EXPERIMENTS.items():
        run = Path("runs") / name
        if not (run / "metrics.jsonl").is_file(): print(f"{run}: not found"); continue
        recs, info = read_metrics(run), read_run_info(run)
        t0 = recs[0]["time"]
        for r in recs:
            if "val_f1" not in r: continue
            rows.append(dict(experiment=name, what=what, commit=commit, step=r["step"], dev_f1=round(r["val_f1"], 2),
                             precision=round(r["val_precision"], 2), recall=round(r["val_recall"], 2),
                             train_s=round(r.get("train_s", r["time"] - t0), 1), cpu_s=r.get("cpu_s", ""),
                             threads=info["hardware"]["torch_threads"], cpu=info["hardware"]["cpu"], command=info["command"]))
    buf = io.StringIO(); w = csv.DictWriter(buf, list(rows[0])); w.writeheader(); w.writerows(rows)
    atomic_write(OUT / "experiments.csv", buf.getvalue())
    for r in rows: print(r["experiment"], r["step"], r["dev_f1"])

def _sha(path: Path) -> str: return hashlib.sha256(Path(path).read_bytes()).hexdigest()

def _best(run: str) -> Path:
    "RUN itself when it is a checkpoint file (e.g. the average `average` chose); else the run's best dev F1 (`best.pt`), else its newest."
    if Path(run).is_file(): return Path(run)
    p = Path(run) / "best.pt"
    return p if p.is_file() else load_checkpoint(run).path

def dev(run: str):
    ck = _best(run)
    res = evaluate_decoding(ck, ptb_trees("dev", DATA), OUT / "dev22.json", [dict(name="cky", beam_size=1)], trees_dir=TREES,
                            source=f"{run}: at-train ptb-chart on this CPU (see run.json and metrics.jsonl there)")
    res["checkpoint_sha256"] = _sha(ck)
    res["step"] = load_checkpoint(ck).step
    atomic_write(OUT / "dev22.json", json.dumps(res, indent=1) + "\n")
    for f in ("metrics.jsonl", "run.json"): atomic_write(OUT / f, (ck.parent / f).read_text())  # no treebank words in them
    print(json.dumps(res["runs"][-1]["scores"]["all"]))

def example(run: str, index: int = 19):
    "The chart of one section-22 sentence (by default the 20th, 15 words): each span's best constituent score and label, and the tree CKY takes."
    from annotated_transformer.parsing.chart_vocab import chart_batch
    from annotated_transformer.parsing.spans import cky
    ck = _best(run)
    model, vocab = load_model(ck, "at-parse")
    gold = ptb_trees("dev", DATA)[int(index)]
    words = gold.words()
    x = chart_batch(vocab, [words])
    with torch.no_grad(): sc = model(x.words, x.chars, x.lengths).float()[0]
    spans, _ = cky(sc.unsqueeze(0), x.lengths)
    best = sc[:, :, 1:].max(-1)
    n = len(words)
    res = dict(split="dev (section 22)", index=int(index), words=words, gold=str(gold),
               best_score=[[round(float(best.values[i, j]), 3) if j > i else None for j in range(n + 1)] for i in range(n + 1)],
               best_label=[[vocab.labels[int(best.indices[i, j]) + 1] if j > i else None for j in range(n + 1)] for i in range(n + 1)],
               tree_spans=[[i, j, vocab.labels[l]] for i, j, l in spans[0]], checkpoint=str(ck))
    atomic_write(OUT / "chart_example.json", json.dumps(res) + "\n")
    print(" ".join(words))

def average(run: str, ns: tuple[int, ...] = (2, 4, 8)):
    "Dev F1 of best.pt and of the averages of the run's last n checkpoints (written as RUN/averaged_last{n}.pt); dev chooses one."
    from annotated_transformer.engine.checkpoint import average_last, list_checkpoints
    from annotated_transformer.parsing.chart_choices import choose_checkpoint
    from annotated_transformer.engine.precision import cpu_flags, NATIVE_BF16_FLAGS
    golds, rows = ptb_trees("dev", DATA), []
    for n in (0, *ns):
        if n > len(list_checkpoints(run)): print(f"{run} keeps fewer than {n} checkpoints"); continue
        if n: average_last(run, n, Path(run) / f"averaged_last{n}.pt")
        ck = Path(run) / (f"averaged_last{n}.pt" if n else "best.pt")
        steps = [load_checkpoint(p).step for p in list_checkpoints(run)[-n:]] if n else [load_checkpoint(ck).step]
        model, vocab = load_model(ck, "at-parse")
        r = parse_gold(model, vocab, golds, decode=parse, beam_size=1, batch_size=64)
        rows.append(dict(checkpoint=str(ck), averaged=n, steps=steps, seconds=round(r["seconds"], 1),
                         **{k: r["scores"]["all"][k] for k in ("f1", "precision", "recall", "exact", "sentences")}))
        print(rows[-1], flush=True)
    chosen = rows[choose_checkpoint([r["f1"] for r in rows])]  # the package's rule: best.pt unless an average beats it by more than 0.1
    atomic_write(OUT / "averaging.json", json.dumps(dict(split="dev (section 22), all sentences, CKY", run=str(run), rows=rows,
                 chosen=chosen["checkpoint"], rule="best.pt, unless an average beats its dev F1 by more than 0.1", hardware=hardware(),
                 native_bf16_flags=sorted(cpu_flags() & set(NATIVE_BF16_FLAGS))), indent=1) + "\n")
    print(f"chosen: {chosen['checkpoint']} (dev F1 {chosen['f1']:.2f})")

def fit(run: str, n: int = 1700, seed: int = 0):
    """How well the checkpoint fits what it trained on, against dev: EVALB F1 (CKY) and the span loss per sentence (eval mode, no
    dropout) on `n` training trees drawn with `seed` and on all of section 22 (1700). One entry per checkpoint in fit.json."""
    import random
    from annotated_transformer.parsing.chart import ChartObjective
    from annotated_transformer.parsing.chart_vocab import chart_loader
    ck = _best(run)
    model, vocab = load_model(ck, "at-parse")
    objective = ChartObjective(vocab, model.cfg.loss)
    train = random.Random(seed).sample(ptb_trees("train", DATA), n)
    entry = dict(checkpoint=str(ck), checkpoint_sha256=_sha(ck), step=load_checkpoint(ck).step, dropout=model.cfg.dropout)
    for name, golds in (("train", train), ("dev", ptb_trees("dev", DATA))):
        with torch.no_grad():
            loss = sum(float(objective.loss(model, b)) for b in chart_loader(vocab, golds, 1500, shuffle=False))
        f1 = parse_gold(model, vocab, golds, decode=parse, beam_size=1, batch_size=64)["scores"]["all"]["f1"]
        entry[name] = dict(sentences=len(golds), f1=f1, loss_per_sentence=loss / len(golds))
        print(name, entry[name], flush=True)
    old = json.loads((OUT / "fit.json").read_text())["rows"] if (OUT / "fit.json").is_file() else []
    rows = [r for r in old if r["checkpoint"] != str(ck)] + [entry]
    atomic_write(OUT / "fit.json", json.dumps(dict(what=f"EVALB F1 (CKY, gold tags on the preterminals) and the span loss summed per "
                 f"sentence, eval mode: {n} training trees (WSJ 02-21, random.Random({seed}).sample) against all of section 22",
                 command="python tools/chart_study.py fit RUN", rows=rows, hardware=hardware()), indent=1) + "\n")

def seq2seq_trees():
    "Re-make the sequence-to-sequence parser's best dev trees (13b's setting) and check their F1 against 13b's record."
    res = evaluate_decoding(SEQ2SEQ, ptb_trees("dev", DATA), SEQ2SEQ_TREES / "remade.json", [SEQ2SEQ_BEST],
                            trees_dir=SEQ2SEQ_TREES, source=SEQ2SEQ_SOURCE)
    mine = next(r for r in res["runs"] if r["name"] == SEQ2SEQ_BEST["name"])["scores"]["all"]["f1"]
    rec = json.loads(Path("results/ptb/shared-h100/decoding.json").read_text())
    theirs = next(r for r in rec["runs"] if r["name"] == SEQ2SEQ_BEST["name"])["scores"]["all"]["f1"]
    print(f"dev F1 {mine:.2f}; 13b's record {theirs:.2f}")
    if abs(mine - theirs) > 0.01: sys.exit(f"the re-made trees score {mine:.2f}, not 13b's {theirs:.2f}")

def breakdown():
    "Per label and per length bin, on section 22: the chart parser's trees and the sequence-to-sequence parser's best ones."
    golds = ptb_trees("dev", DATA)
    out = {}
    old = json.loads((OUT / "breakdown.json").read_text())["parsers"] if (OUT / "breakdown.json").is_file() else {}
    for name, path, source in (("chart", TREES / "cky.trees", "13c: the encoder with CKY (tools/chart_study.py dev)"),
                               ("seq2seq", SEQ2SEQ_TREES / f"{SEQ2SEQ_BEST['name']}.trees",
                                f"13b: {SEQ2SEQ_SOURCE}; beam 21, alpha 0.3, under TreeConstraint (tools/parsing_study.py dev)")):
        if not path.is_file() and name == "seq2seq" and name in old:
            # A fixed checkpoint and a deterministic search: re-making its trees (beam 21, about an hour on a CPU) gives the same entry.
            out[name] = old[name]; print(f"{path}: not found; the seq2seq entry is kept from {OUT / 'breakdown.json'}"); continue
        if not path.is_file(): sys.exit(f"{path}: not found; run the command that writes it first")
        tests = [with_tags(t, g) for t, g in zip(read_trees(path), golds)]
        out[name] = dict(source=source, scores=evalb(golds, tests)["all"], **evalb_breakdown(golds, tests))
    atomic_write(OUT / "breakdown.json", json.dumps(dict(split="dev (section 22)", parsers=out), indent=1) + "\n")

def speed(run: str, n: int = 300, threads: int = 1):
    "Parsing speed of both parsers on the first n dev sentences, one thread, after one untimed warm-up batch."
    torch.set_num_threads(threads)
    sents = [g.words() for g in ptb_trees("dev", DATA)[:n]]
    rows = []
    for name, path, kw in (("chart (CKY)", _best(run), dict(batch_size=64)),
                           ("seq2seq greedy, constrained", SEQ2SEQ, dict(beam_size=1, batch_size=32)),
                           ("seq2seq beam 21, constrained", SEQ2SEQ, dict(beam_size=21, alpha=0.3, batch_size=32))):
        model, vocab = load_model(path, "at-parse")
        k = n if "beam" not in name else min(n, 100)  # beam 21 takes about 2 s a sentence on one core
        parse(model, vocab, sents[:8], **kw)  # warm-up
        t0 = time.perf_counter(); parse(model, vocab, sents[:k], **kw); dt = time.perf_counter() - t0
        rows.append(dict(parser=name, checkpoint=str(path), sentences=k, words=sum(map(len, sents[:k])), seconds=round(dt, 2),
                         sentences_per_s=round(k / dt, 2), **{k_: v for k_, v in kw.items()}))
        print(rows[-1], flush=True)
    atomic_write(OUT / "speed.json", json.dumps(dict(split="dev (section 22), first sentences", threads=threads, rows=rows,
                                                     hardware=hardware()), indent=1) + "\n")

def _preterminals(models, vocab) -> str:
    "What the parse puts on the preterminals (`names_tags`, as `chart_parse` decides): the tagger heads' tags, else XX."
    from annotated_transformer.parsing.chart import names_tags
    return "the tagger head's tags" if names_tags(models, vocab) else "XX"

def test23(run: str, out_name: str = "test23.json"):
    "The blind parse of section 23's words, in order, with the chosen checkpoint: NAME.pred.txt beside its record NAME.json."
    ck = _best(run)
    model, vocab = load_model(ck, "at-parse")
    sents = read_sentences(str(DATA / "ptb" / "test_23.words"), max_words(model, vocab))
    t0 = time.perf_counter(); trees = [t for t, _ in parse(model, vocab, sents, batch_size=64)]; dt = time.perf_counter() - t0
    for t, s in zip(trees, sents): assert t.words() == s, s  # one tree per line over exactly the sentence's words
    pred = _pred_name(out_name)
    atomic_write(OUT / pred, "".join(str(t) + "\n" for t in trees))
    step = load_checkpoint(ck).step
    meta = dict(command=f"python tools/chart_study.py test23 {run}{_out_arg(out_name, 'test23.json')}  (at-parse --checkpoint {ck} "
                        f"--input {DATA}/ptb/test_23.words --output {OUT}/{pred} gives the same trees)",
                checkpoint=str(ck), checkpoint_sha256=_sha(ck), step=step, sentences=len(trees), seconds=round(dt, 1),
                preterminals=_preterminals([model], vocab), hardware=hardware(),
                note="blind: section 23 gold trees are not available to the project; the checkpoint was chosen by dev F1 (section 22)")
    atomic_write(OUT / out_name, json.dumps(meta, indent=1) + "\n")
    print(f"{len(trees)} trees in {dt:.1f} s")

def test23_ensemble(*runs: str, out_name: str = "test23-ensemble.json"):
    """The blind parse of section 23's words by an ensemble of two or more runs (the package's `chart_parse` of a list of parsers: CKY
    on the mean of their label log-probabilities, as `ensemble` scores it on section 22), beside the single model's:
    NAME.pred.txt and NAME.json (test23-ensemble by default). `at-parse --checkpoint RUN RUN ...` parses the same way."""
    from annotated_transformer.parsing.chart import chart_parse
    models, vocab = _load_same_vocab("test23-ensemble", runs)
    sents = read_sentences(str(DATA / "ptb" / "test_23.words"), max_words(models, vocab))
    t0 = time.perf_counter()
    trees = chart_parse(models, vocab, sents)
    dt = time.perf_counter() - t0
    for t, s in zip(trees, sents): assert t.words() == s, s  # one tree per line over exactly the sentence's words
    atomic_write(OUT / _pred_name(out_name), "".join(str(t) + "\n" for t in trees))
    cks = [_best(r) for r in runs]
    meta = dict(command="python tools/chart_study.py test23-ensemble " + " ".join(runs) + _out_arg(out_name, "test23-ensemble.json"), checkpoints=[str(c) for c in cks],
                checkpoint_sha256=[_sha(c) for c in cks], steps=[load_checkpoint(c).step for c in cks], sentences=len(trees),
                seconds=round(dt, 1), preterminals=_preterminals(models, vocab), hardware=hardware(),
                note="blind: section 23 gold trees are not available to the project; the ensemble was chosen by dev F1 (section 22, ensemble.json)")
    atomic_write(OUT / out_name, json.dumps(meta, indent=1) + "\n")
    print(f"{len(trees)} trees in {dt:.1f} s")

def step_speed(steps: int = 24, warm: int = 4, rounds: int = 2):
    """Seconds per training step of the ptb-chart preset on WSJ batches, the package's step against the readable one
    (`fast_path.chart_step_speed`, nbs/32a_fast_path.ipynb): `steps` timed steps a block, after `warm`, for `rounds` rounds."""
    from dataclasses import replace
    from annotated_transformer.engine.tasks import task_preset, build_chart_data
    from annotated_transformer.bench.fast_path import chart_step_speed
    torch.manual_seed(0)
    mcfg, tcfg, spec = task_preset("ptb-chart")
    data = build_chart_data(replace(spec, data_dir=str(DATA)), mcfg, tcfg)
    out = dict(command="python tools/chart_study.py step-speed", **chart_step_speed(data, steps, warm, rounds))
    atomic_write(OUT / "step_speed.json", json.dumps(out, indent=1) + "\n")
    per = out["seconds_per_step"]
    print(f"s/step readable {per['readable']:.3f}, fast {per['fast']:.3f}: {out['ratio_readable_over_fast']:.2f}x")

def decode(run: str, other: str):
    """Decoding choices on section 22, from the same span scores: the package's `decoding_choices` (CKY on the raw scores, a
    constant added to every non-empty label, label probabilities minus a threshold, and RUN and OTHER as an ensemble), each
    counted by `decoding_sums` (the trainer's `ChartObjective.eval_sums`)."""
    from annotated_transformer.parsing.chart_choices import decoding_choices, decoding_sums
    (m1, m2), vocab = _load_same_vocab("decode", (run, other))
    golds = ptb_trees("dev", DATA)
    t0 = time.perf_counter(); sums = decoding_sums([m1, m2], vocab, golds, decoding_choices()); seconds = time.perf_counter() - t0
    rows = [dict(decoding=name, **_prf(s)) for name, s in sums.items()]
    for r in rows: print(r, flush=True)
    atomic_write(OUT / "decoding.json", json.dumps(dict(split="dev (section 22), all 1700 sentences, EVALB (COLLINS.prm)",
                 command=f"python tools/chart_study.py decode {run} {other}", checkpoints=[str(_best(run)), str(_best(other))],
                 rows=rows, seconds=round(seconds, 1), hardware=hardware()), indent=1) + "\n")

def _prf(sums) -> dict:
    "F1, precision and recall of `decoding_sums`' counts (matched, gold, test, sentences)."
    from annotated_transformer.parsing.evalb import bracket_prf
    s = bracket_prf(*sums[:3].tolist())
    return {k: s[k] for k in ("f1", "precision", "recall")}

def _pred_name(out_name: str) -> str: return out_name[:-len(".json")] + ".pred.txt"  # NAME.json's trees: NAME.pred.txt
def _out_arg(out_name: str, default: str) -> str: return "" if out_name == default else f" --out {out_name}"  # as the command line had it

def _load_same_vocab(command: str, runs) -> tuple[list, object]:
    "The runs' parsers and their one vocabulary (`load_model`: chart parsers of the same training trees and word features), or the command stops with one line."
    try: return load_model([_best(r) for r in runs])
    except CheckpointError as e: sys.exit(f"chart_study.py {command}: {e}")

def ensemble(*runs: str, out_name: str = "ensemble.json"):
    """Ensembles on section 22 (the package's `ensemble_choices`): each run alone, every pair, and (three or more runs) all of
    them, each CKY on the mean of its members' label log-probabilities, as the last row of `decode`. The runs may differ in size
    and precision; they must share the vocabulary (the same training trees and word features)."""
    from annotated_transformer.parsing.chart_choices import decoding_sums, ensemble_choices
    models, vocab = _load_same_vocab("ensemble", runs)
    golds = ptb_trees("dev", DATA)
    t0 = time.perf_counter(); sums = decoding_sums(models, vocab, golds, ensemble_choices(len(runs))); seconds = time.perf_counter() - t0
    rows = []
    for m, s in sums.items():
        rows.append(dict(members=[str(_best(runs[i])) for i in m], **_prf(s)))
        print(len(m), rows[-1], flush=True)
    atomic_write(OUT / out_name, json.dumps(dict(split="dev (section 22), all 1700 sentences, EVALB (COLLINS.prm)",
                 command="python tools/chart_study.py ensemble " + " ".join(runs) + _out_arg(out_name, "ensemble.json"), rows=rows, seconds=round(seconds, 1),
                 hardware=hardware()), indent=1) + "\n")

COMMANDS = {"dev": (dev, 1), "average": (average, 1), "fit": (fit, 1), "example": (example, 1), "seq2seq-trees": (seq2seq_trees, 0), "breakdown": (breakdown, 0),
            "speed": (speed, 1), "test23": (test23, 1), "experiments": (experiments, 0),
            "step-speed": (step_speed, 0), "decode": (decode, 2), "ensemble": (ensemble, -2),
            "test23-ensemble": (test23_ensemble, -2)}  # name -> (function, RUN arguments; -2: two or more)

def _written_by(path: Path) -> str | None:
    "The chart_study.py command that wrote a results file, read from the command line it records; None for any other file."
    try: words = json.loads(path.read_text()).get("command", "").split()
    except (OSError, ValueError, AttributeError): return None
    return words[2] if len(words) > 2 and words[1].endswith("chart_study.py") else None

OUT_NAMED = ("ensemble", "test23", "test23-ensemble")  # the commands that take --out NAME.json
USAGE = "usage: python tools/chart_study.py COMMAND [RUN...] [--out NAME.json]  (--help: the commands and what each writes)"

class UsageError(SystemExit):
    "A missing or unknown command, or a wrong count of runs: one line (the exit code); run as a script, the usage after it and exit 2."

def main(argv: list[str]) -> None:
    "Check the command line, then run the command: a bad command, argument count or run directory gets one line and a non-zero exit."
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip()); return
    if not argv or argv[0] not in COMMANDS:
        raise UsageError(f"chart_study.py: expected a command, one of {', '.join(COMMANDS)}; got {repr(argv[0]) if argv else 'nothing'}")
    (fn, n), args = COMMANDS[argv[0]], argv[1:]
    kw = {}
    if "--out" in args:  # COMMAND RUN... --out NAME.json: another results file than the command's own (test23*: and NAME.pred.txt)
        i = args.index("--out")
        if argv[0] not in OUT_NAMED:
            sys.exit(f"chart_study.py {argv[0]}: --out is an option of {', '.join(OUT_NAMED)} only")
        if i != len(args) - 2 or Path(args[-1]).name != args[-1] or not args[-1].endswith(".json") or args[-1] == ".json":
            sys.exit(f"chart_study.py {argv[0]}: --out expects one file name NAME.json after the runs (written under {OUT}); got {args[i + 1:]}")
        if (OUT / args[-1]).exists() and _written_by(OUT / args[-1]) != argv[0]:  # never overwrite another command's results
            sys.exit(f"chart_study.py {argv[0]}: --out {args[-1]}: {OUT / args[-1]} is not a record of chart_study.py {argv[0]}; choose another name")
        kw, args = dict(out_name=args[-1]), args[:-2]
    if len(args) != n and not (n < 0 and len(args) >= -n):
        what = {0: "no arguments", 1: "RUN, a run directory or checkpoint", 2: "RUN and OTHER, two run directories or checkpoints",
                -2: "two or more run directories or checkpoints"}[n]
        raise UsageError(f"chart_study.py {argv[0]}: expected {what}; got {len(args)}")
    for a in args:
        if not (Path(a).is_dir() or (argv[0] != "average" and Path(a).is_file())):
            sys.exit(f"chart_study.py {argv[0]}: {a}: not a run directory{'' if argv[0] == 'average' else ' or checkpoint file'}")
    if argv[0] == "average" and not (Path(args[0]) / "best.pt").is_file():
        sys.exit(f"chart_study.py average: {args[0]}: no best.pt (expected a run directory of at-train ptb-chart)")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    made = [d for d in (OUT, *OUT.parents) if not d.exists()]  # the folders this command makes, innermost first
    OUT.mkdir(parents=True, exist_ok=True)
    try: fn(*args, **kw)
    except CheckpointError as e: sys.exit(f"chart_study.py {argv[0]}: {e}")  # a damaged or foreign checkpoint: one line
    finally:  # a command that stopped before writing anything leaves no empty folders behind
        for d in made:
            if any(d.iterdir()): break
            d.rmdir()

if __name__ == "__main__":
    try: main(sys.argv[1:])
    except UsageError as e:
        print(e.code, USAGE, sep="\n", file=sys.stderr); sys.exit(2)
