"""The decoding study of 19_parser, run on a CPU with the GPU-trained checkpoint in ../shared/models/ptb-small-h100.

    python tools/parsing_study.py dev      # results/ptb/shared-h100/decoding.json (greedy/beam x constrained or not)
    python tools/parsing_study.py why      # results/ptb/shared-h100/why_beam.json (why unconstrained beam loses, 100 sentences)
    python tools/parsing_study.py test23 SECONDS  # results/ptb/test23.json: the record of the at-parse run on section 23

The predicted dev trees go to runs/ptb-shared-eval/ (not committed: they hold the treebank's words).
"""
import hashlib, json, os, sys
from pathlib import Path
import torch
from annotated_transformer.parsing.parser import TreeConstraint
from annotated_transformer.engine.parsing_runs import evaluate_decoding
from annotated_transformer.engine.loading import load_model
from annotated_transformer.parsing.trees import ptb_trees, delinearize
from annotated_transformer.parsing.evalb import evalb, with_tags
from annotated_transformer.engine.parsing_runs import read_sentences
from annotated_transformer.architecture.attention import padding_mask
from annotated_transformer.training.decode import beam_search, greedy_decode, score_hypothesis
from annotated_transformer.engine.runs import hardware

CKPT = Path("../shared/models/ptb-small-h100/checkpoint.pt")
SOURCE = ("../shared/models/ptb-small-h100: ptb-small trained on one H100 by the project's code at 5da1a12 "
          "(step 6244, 470 s); not a CPU run")
OUT = Path("results/ptb/shared-h100")

def dev():
    settings = [dict(name="greedy-unconstrained", beam_size=1, constrained=False),
                dict(name="greedy-constrained", beam_size=1, constrained=True),
                dict(name="beam21-unconstrained-first300", beam_size=21, alpha=0.3, constrained=False, n=300),
                dict(name="beam21-constrained", beam_size=21, alpha=0.3, constrained=True)]
    evaluate_decoding(CKPT, ptb_trees("dev", "../shared/data"), OUT / "decoding.json", settings,
                      trees_dir="runs/ptb-shared-eval", source=SOURCE)

def why(n: int = 100, alpha: float = 0.3):
    "Per sentence: the score s(Y, X) beam search maximizes and the words left without a slot, for three searches."
    model, vocab = load_model(CKPT, "at-parse")
    golds = ptb_trees("dev", "../shared/data")[:n]
    res = {}
    greedy_scores = None
    for name, beam, constrained in (("greedy-unconstrained", 1, False), ("beam21-unconstrained", 21, False),
                                    ("beam21-constrained", 21, True)):
        scores, short, missing, trees = [], 0, 0, []
        for g in golds:
            words = g.words()
            src = torch.tensor([vocab.encode_src(words) + [vocab.eos_id]])  # (1, S)
            con = TreeConstraint(vocab, [len(words)]) if constrained else None
            with torch.no_grad():
                if beam == 1:
                    toks = greedy_decode(model, src, None, 1.0, 300, constraint=con)[0].tolist()
                    toks = toks[: toks.index(vocab.eos_id) + 1] if vocab.eos_id in toks else toks
                    scores.append(score_hypothesis(model, src, toks, alpha))
                else:
                    h = beam_search(model, src, None, beam, alpha, 1.0, 300, early_stop=False, constraint=con)[0][0]
                    toks = h.tokens; scores.append(h.score)
            out = vocab.decode_tgt(toks)
            left = len(words) - sum(t == "XX" for t in out)
            short += left > 0; missing += max(left, 0)
            trees.append(with_tags(delinearize(out, words)[0], g))
        if greedy_scores is None: greedy_scores = scores
        res[name] = dict(f1=evalb(golds, trees)["all"]["f1"], mean_score=sum(scores) / n, short=short, missing_xx=missing,
                         above_greedy=sum(s > gs + 1e-6 for s, gs in zip(scores, greedy_scores)), scores=scores)
        print(name, {k: v for k, v in res[name].items() if k != "scores"}, flush=True)
    (OUT / "why_beam.json").write_text(json.dumps(dict(checkpoint=str(CKPT), source=SOURCE, n=n, alpha=alpha, split="dev (section 22), first n",
                                                       settings=res, hardware=hardware()), indent=1) + "\n")

def test23(seconds: float):
    "The record of the blind section-23 run (the trees themselves are written by at-parse)."
    pred = Path("results/ptb/test23.pred.txt").read_text(encoding="utf-8").splitlines()
    sents = read_sentences("../shared/data/ptb/test_23.words", 10_000)
    assert len(pred) == len(sents), (len(pred), len(sents))
    meta = dict(command="at-parse --checkpoint ../shared/models/ptb-small-h100/checkpoint.pt --input ../shared/data/ptb/test_23.words "
                        "--beam 21 --alpha 0.3 --output results/ptb/test23.pred.txt",
                model=SOURCE, checkpoint_sha256=hashlib.sha256(CKPT.read_bytes()).hexdigest(), sentences=len(pred),
                beam=21, alpha=0.3, constrained=True, seconds=seconds, omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
                repaired=("not counted by this run (at-parse printed its repair count only from a later commit); under TreeConstraint "
                          "a repair needs a sentence whose shortest tree (words + 3 tokens) exceeds the output limit "
                          f"(min(BPE length + 300, 511)); the longest sentence here has {max(map(len, sents))} words"),
                hardware=hardware(), note="blind: section 23 gold trees are not available to the project; nothing was tuned on it")
    Path("results/ptb/test23.json").write_text(json.dumps(meta, indent=1) + "\n")

USAGE = "usage: python tools/parsing_study.py {dev | why | test23 SECONDS}  (--help: what each command writes)"

def main(argv: list[str]) -> int:
    "Check the command line, then run the command; --help prints the docstring, a bad command line one line and the usage (exit 2)."
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip()); return 0
    def bad(what: str) -> int:
        print(f"parsing_study.py: {what}", USAGE, sep="\n", file=sys.stderr); return 2
    if not argv or argv[0] not in ("dev", "why", "test23"):
        return bad(f"expected a command, one of dev, why, test23; got {repr(argv[0]) if argv else 'nothing'}")
    if argv[0] == "test23":
        try: seconds, = map(float, argv[1:])
        except ValueError: return bad(f"test23: expected SECONDS, the at-parse run's wall-clock seconds (one number); got {argv[1:]}")
    elif len(argv) > 1: return bad(f"{argv[0]}: expected no arguments; got {argv[1:]}")
    torch.set_num_threads(1)
    {"dev": dev, "why": why, "test23": lambda: test23(seconds)}[argv[0]]()
    return 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
