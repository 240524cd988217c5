"""The Python EVALB of 18_evalb against the reference C program, on the same files, sentence by sentence.

    python tools/evalb_check.py PRED     # writes results/ptb/evalb-c-check.json

EVALB's `evalb.c`, `COLLINS.prm` and `sample/` are vendored in `tests/evalb_c/` (public domain; its README says where
from); `evalb.c` is compiled with the machine's C compiler into a temporary folder. PRED is a parse of WSJ section 22
by `at-parse --gold ../shared/data/ptb/dev_22.clean --output PRED`: its trees hold the treebank's words, so it stays out
of the repository, and only the counts are written. `tests/test_parsing.py` imports `build` and `compare` from here.

Four comparisons, each with COLLINS.prm: EVALB's own sample files (made to exercise its error cases); the parser's
trees (with the gold POS tags copied on, as 13a scores them) against the gold trees; the gold trees against the same
trees with predicted POS tags (`22.auto.clean`), where punctuation is deleted by each tree's own tags; and the gold
trees against the treebank's original ones (`wsj_22.mrg.gz`: function tags, -NONE- elements, traces, an unlabelled root). For every
sentence both sides must agree on whether it is scored and, if it is, on the matched, gold and test bracket counts;
the totals are compared as the C program prints them (two decimals). COLLINS.prm's MAX_ERROR 10 (stop after ten
sentences in error) is lifted, since ours scores every file to the end.
"""
import gzip, hashlib, json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path
from annotated_transformer.parsing.trees import parse_tree, TreeError
from annotated_transformer.parsing.evalb import evalb_sentence, evalb, with_tags, EvalbParams

DATA = Path("../shared/data/ptb")
EVALB_C = Path(__file__).resolve().parents[1] / "tests" / "evalb_c"
OUT = Path("results/ptb/evalb-c-check.json")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+(\d+)\s+(\d+)\s+(\d+)\s")  # ID Len Stat Recall Prec Matched gold test ...

def run_c(binary: Path, prm: Path, gold: Path, test: Path) -> dict:
    "The C program's per-sentence counts (scored sentences only) and its two summary blocks."
    out = subprocess.run([str(binary), "-p", str(prm), str(gold), str(test)], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        if m := ROW.match(line):
            i, length, stat, match, g, t = map(int, m.groups())
            rows[i] = dict(length=length, status=stat, match=match, gold=g, test=t)
    blocks = {}
    for name, text in re.findall(r"-- (All|len<=\d+) --\n(.*?)(?=\n--|\Z)", out, re.S):
        get = lambda key: float(m.group(1)) if (m := re.search(rf"{key}\s*=\s*([\d.]+)", text)) else None  # absent when nothing was scored
        blocks["all" if name == "All" else name] = dict(
            sentences=int(get("Number of sentence")), errors=int(get("Number of Error sentence")), skipped=int(get("Number of Skip  sentence")),
            valid=int(get("Number of Valid sentence")), recall=get("Bracketing Recall"), precision=get("Bracketing Precision"),
            f1=get("Bracketing FMeasure"), exact=get("Complete match"))
    return dict(rows=rows, summary=blocks)

def run_python(gold_lines: list[str], test_lines: list[str], copy_tags: bool) -> dict:
    "Ours on the same lines: per sentence the counts of `evalb_sentence` (or an error: not scored, with why), and the totals of `evalb`."
    rows, golds, tests = {}, [], []
    for i, (gl, tl) in enumerate(zip(gold_lines, test_lines), 1):
        try: g, t = parse_tree(gl), parse_tree(tl)
        except (TreeError, ValueError) as e:
            rows[i] = dict(error=f"unreadable tree: {e}"); continue
        if copy_tags: t = with_tags(t, g)
        rows[i] = evalb_sentence(g, t)
        golds.append(g); tests.append(t)
    return dict(rows=rows, summary=evalb(golds, tests))

def compare(name: str, binary: Path, prm: Path, gold: Path, test: Path, copy_tags: bool = False, test_name: str | None = None) -> dict:
    "Both scorers on one gold and one test file: per-sentence disagreements (the first five kept) and the totals side by side."
    shown = (test_name or os.path.relpath(test)) + (" (the gold tags copied on)" if copy_tags else "")
    gold_lines, test_lines = gold.read_text().splitlines(), test.read_text().splitlines()  # one tree a line; a blank line is a sentence
    if len(gold_lines) != len(test_lines): sys.exit(f"{name}: {len(gold_lines)} gold trees but {len(test_lines)} test trees in {gold} and {test}")
    if copy_tags:  # the C program sees what ours scores: the parser's trees with the gold tags (the model predicts XX)
        tmp = Path(tempfile.mkdtemp()) / "test.tagged"
        tmp.write_text("".join(str(with_tags(parse_tree(t), parse_tree(g))) + "\n" for g, t in zip(gold_lines, test_lines)))
        test = tmp
    unlimited = Path(tempfile.mkdtemp()) / prm.name  # COLLINS.prm stops the C program after 10 error sentences; ours never stops
    unlimited.write_text(re.sub(r"^MAX_ERROR\s+\d+", "MAX_ERROR 1000000", prm.read_text(), flags=re.M))
    c, py = run_c(binary, unlimited, gold, test), run_python(gold_lines, test_lines, copy_tags)
    differ = []
    for i in range(1, len(gold_lines) + 1):
        cr, pr = c["rows"].get(i), py["rows"][i]
        c_scored, p_scored = cr is not None and cr["status"] == 0, "error" not in pr
        if c_scored != p_scored or (c_scored and (cr["match"], cr["gold"], cr["test"]) != (pr["match"], pr["gold"], pr["test"])):
            differ.append(dict(sentence=i, c=cr, python=pr))
    totals = {}
    for block, key in (("all", "all"), ("len<=40", "len<=40")):
        cs, ps = c["summary"][block], py["summary"][key]
        totals[block] = dict(c={k: cs[k] for k in ("valid", "recall", "precision", "f1", "exact")},
                             python=dict(valid=ps["sentences"] - ps["errors"], **{k: round(ps[k], 2) for k in ("recall", "precision", "f1", "exact")}))
    return dict(name=name, gold=os.path.relpath(gold), test=shown,
                sentences=len(gold_lines), scored_c=sum(r["status"] == 0 for r in c["rows"].values()),
                scored_python=sum("error" not in r for r in py["rows"].values()), sentences_that_differ=len(differ),
                first_differences=differ[:5], totals=totals)

def mrg_one_per_line(path: Path) -> Path:
    "The treebank's .mrg trees (gzipped, spread over lines) one per line, by text alone: a tree starts at a '(' in column 0."
    trees, cur = [], []
    for line in gzip.open(path, "rt").read().splitlines():
        if line.startswith("(") and cur: trees.append(" ".join(cur)); cur = []
        if line.strip(): cur.append(line.strip())
    out = Path(tempfile.mkdtemp()) / (path.name.removesuffix(".gz") + ".lines")
    out.write_text("".join(re.sub(r"\s+", " ", t) + "\n" for t in trees + [" ".join(cur)] if t))
    return out

def build(into: Path, src: Path = EVALB_C) -> Path:
    "evalb.c compiled with the machine's C compiler (gcc or cc) into `into`; the binary's path."
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None: raise FileNotFoundError("no C compiler (gcc or cc) on PATH")
    subprocess.run([cc, "-O2", "-o", str(into / "evalb"), str(src / "evalb.c")], check=True, capture_output=True)
    return into / "evalb"

def main(pred: str):
    for need in (Path(pred), DATA / "dev_22.clean", DATA / "22.auto.clean", DATA / "wsj_22.mrg.gz"):
        if not need.is_file(): sys.exit(f"evalb_check: {need}: no such file (PRED is a parse of section 22 by at-parse; the rest are in ../shared/data/ptb)")
    src, t0 = EVALB_C, time.time()
    build_ = build(Path(tempfile.mkdtemp()))
    prm = src / "COLLINS.prm"
    cases = [compare("EVALB's sample files", build_, prm, src / "sample" / "sample.gld", src / "sample" / "sample.tst"),
             compare("section 22 parsed by ../shared/models/ptb-small-h100 (at-parse, greedy, constrained)", build_, prm,
                     DATA / "dev_22.clean", Path(pred), copy_tags=True),
             compare("section 22, gold trees against the same trees with predicted POS tags (22.auto.clean)", build_, prm,
                     DATA / "dev_22.clean", DATA / "22.auto.clean"),
             compare("section 22, gold trees against the treebank's original trees (function tags, empty elements and traces kept)",
                     build_, prm, DATA / "dev_22.clean", mrg_one_per_line(DATA / "wsj_22.mrg.gz"),
                     test_name=f"{DATA / 'wsj_22.mrg.gz'}, one tree a line")]
    sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()
    OUT.write_text(json.dumps(dict(
        evalb_c=dict(source="tests/evalb_c (EVALB/ of nikitakit/self-attentive-parser at 24435a1)", evalb_c_sha256=sha(src / "evalb.c"),
                     collins_prm_sha256=sha(prm), compiler=subprocess.run([shutil.which("gcc") or "cc", "--version"], capture_output=True,
                                                                           text=True).stdout.splitlines()[0]),
        pred=dict(path=pred, sha256=sha(pred)),
        python=EvalbParams().__dict__, cases=cases, seconds=round(time.time() - t0, 1),
        command=f"python tools/evalb_check.py {pred}"), indent=1) + "\n")
    for c in cases:
        print(f"{c['name']}: {c['sentences']} sentences, scored {c['scored_c']} (C) / {c['scored_python']} (ours), "
              f"{c['sentences_that_differ']} differ; F1 all {c['totals']['all']['c']['f1']} / {c['totals']['all']['python']['f1']}")
    print(f"wrote {OUT}")

USAGE = "usage: python tools/evalb_check.py PRED  (--help: what it compares and writes)"

if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip()); sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        got = "nothing" if len(sys.argv) == 1 else repr(sys.argv[1]) if len(sys.argv) == 2 else f"{len(sys.argv) - 1} arguments"
        print(f"evalb_check.py: expected one argument, PRED (section 22 parsed by at-parse); got {got}", USAGE, sep="\n", file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
