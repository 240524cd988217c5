"""Every console script on bad inputs of every kind (issue 16): missing, empty, a directory, unreadable, not UTF-8, truncated,
a checkpoint of the wrong kind, zero / negative / NaN / non-number values, an unwritable output.

One table (`ROWS`) drives most of it. Each row runs a console script's entry function IN-PROCESS with an argv and asserts:
the exit code (2 for a usage error argparse can see, else non-zero), no traceback (an exception other than SystemExit that
escapes the entry function is one), a one-line message on stderr (`PROG: error: ...`, no usage block before it: issue 63)
that names the argument, file or line, and nothing left behind in the case directory (no new, changed or removed file,
no `*.tmp`). A few rows expect success (exit 0): a resume that must fall back past a truncated checkpoint, a torn
`metrics.jsonl` or `table3.csv` line that must be dropped with a warning, a tiny `at-bench` run.

A few subprocess runs of the console-script command (`sys.exit(entry())`) prove the wrapper itself prints no traceback and
no result dict, and `at-train` interrupted by SIGINT / SIGTERM must save and exit 130 / 143.

The entry points live in `ENTRY`: re-point them there when the scripts move (e.g. into `annotated_transformer/commands/cli.py`).
Everything the tests read is made here in tmp directories (tiny runs of 2-4 steps); nothing is downloaded.
"""
import csv, errno, hashlib, importlib, io, json, os, random, re, shutil, signal, subprocess, sys, time, types
from dataclasses import asdict
from pathlib import Path
import pytest, torch
from conftest import run_entry, write_tiny_multi30k

# console script -> "module:function", each `(argv: list[str] | None = None) -> int` (None counts as 0)
ENTRY = {
    "at-train": "annotated_transformer.commands.cli:train_main",
    "at-translate": "annotated_transformer.commands.cli:translate_main",
    "at-evaluate": "annotated_transformer.commands.cli:evaluate_main",
    "at-parse": "annotated_transformer.commands.cli:parse_main",
    "at-variations": "annotated_transformer.commands.experiments:variations_main",
    "at-bench": "annotated_transformer.commands.experiments:bench_main",
}

REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
CUDA = torch.cuda.is_available()
not_root = pytest.mark.skipif(ROOT, reason="running as root: chmod 000 does not stop root from reading")
no_cuda = pytest.mark.skipif(CUDA, reason="a CUDA device is available: --device cuda is not a bad input here")

def entry(script: str):
    "The entry function of a console script, imported from `ENTRY`."
    mod, func = ENTRY[script].split(":")
    return getattr(importlib.import_module(mod), func)

def console_command(script: str) -> list[str]:
    "The command a console-script wrapper runs: `sys.exit(entry())`, against the checkout under test (PYTHONPATH)."
    mod, func = ENTRY[script].split(":")
    return [sys.executable, "-c", f"import sys; from {mod} import {func}; sys.exit({func}())"]

def subprocess_env(cache_dir) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "AT_CACHE_DIR": str(cache_dir)}

# ---------------------------------------------------------------- tiny inputs, made once per session

GOOD_DE = "ein mann läuft auf dem gras\nein hund sitzt\n"
TRAIN_COPY = ["--max-steps", "2", "--copy-n", "100", "--n-valid", "10", "--eval-every", "0", "--no-progress",
              "--device", "cpu", "--precision", "fp32"]  # every copy row: if the script does not refuse, it is quick
TINY_MT = ["--no-download", "--vocab-size", "320", "--d-model", "32", "--d-ff", "64", "--n-heads", "2", "--n-layers", "1",
           "--max-len", "64", "--max-steps", "2", "--warmup-steps", "2", "--eval-every", "0", "--max-tokens", "400",
           "--precision", "fp32", "--device", "cpu", "--no-progress"]

def _quiet(fn, *args):
    "Run a builder with stdout/stderr swallowed (the session fixtures train tiny runs)."
    import contextlib
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()): return fn(*args)

@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    "Word-for-word German/English pairs in the Multi30k layout (conftest.write_tiny_multi30k), 8 validation and test lines."
    return write_tiny_multi30k(tmp_path_factory.mktemp("data"), 8)

@pytest.fixture(scope="session")
def empty_cache(tmp_path_factory):
    "An empty download cache: a missing data directory must not fall back to a Multi30k cached on this machine."
    return tmp_path_factory.mktemp("cache")

@pytest.fixture(scope="session")
def copy_run(tmp_path_factory):
    "`at-train copy`, 2 steps, a checkpoint after each: ckpt_0000001.pt, ckpt_0000002.pt, latest, metrics.jsonl."
    run = tmp_path_factory.mktemp("copy") / "run"
    rc = _quiet(entry("at-train"), ["copy", "--run-dir", str(run), *TRAIN_COPY, "--save-every", "1", "--keep-last", "5",
                                    "--log-every", "1"])
    assert rc == 0 and (run / "ckpt_0000002.pt").is_file()
    return run

@pytest.fixture(scope="session")
def mt_run(tmp_path_factory, data_dir, empty_cache):
    "`at-train multi30k` on the tiny corpus, 4 steps, checkpoints at 2 and 4, the tokenizer inside each checkpoint."
    run = tmp_path_factory.mktemp("mt") / "run"
    old = os.environ.get("AT_CACHE_DIR"); os.environ["AT_CACHE_DIR"] = str(empty_cache)
    try:
        rc = _quiet(entry("at-train"), ["multi30k", "--data-dir", str(data_dir), "--run-dir", str(run), *TINY_MT,
                                        "--max-steps", "4", "--save-every", "2", "--keep-last", "5", "--log-every", "1"])
    finally:
        if old is None: os.environ.pop("AT_CACHE_DIR", None)
        else: os.environ["AT_CACHE_DIR"] = old
    assert rc == 0 and (run / "ckpt_0000004.pt").is_file()
    return run

@pytest.fixture(scope="session")
def parse_run(tmp_path_factory):
    "A parser trained 2 steps on toy trees (a checkpoint after each), with a parsing vocabulary inside."
    from annotated_transformer.parsing.trees import parse_tree
    from annotated_transformer.parsing.parser import ParsingVocab, encode_trees
    from annotated_transformer.engine.tasks import DataSpec
    from annotated_transformer.engine.config import TransformerConfig
    from annotated_transformer.architecture.model import make_model
    from annotated_transformer.training.batching import make_loader
    from annotated_transformer.engine.train import Trainer, TrainConfig, seed_everything
    run = tmp_path_factory.mktemp("parse") / "run"
    N, V, D = "dog cat man park idea bird".split(), "saw liked found".split(), "the a this".split()
    rng = random.Random(0)
    np_ = lambda: f"(NP (DT {rng.choice(D)}) (NN {rng.choice(N)}))"
    trees = [parse_tree(f"(TOP (S {np_()} (VP (VBD {rng.choice(V)}) {np_()}) (. .)))") for _ in range(300)]
    seed_everything(0)
    vocab = ParsingVocab.build(trees, vocab_size=300)
    cfg = TransformerConfig.tiny(src_vocab_size=vocab.src_vocab_size, tgt_vocab_size=vocab.tgt_vocab_size,
                                 tie_embeddings=False, max_len=128, norm_first=True)
    tcfg = TrainConfig(max_steps=2, warmup_steps=1, max_tokens=800, log_every=1, eval_every=0, save_every=1, keep_last=5,
                         run_dir=str(run), progress=False, device="cpu", precision="fp32")
    pairs, _ = encode_trees(trees, vocab, cfg.max_len)
    _quiet(lambda: Trainer(make_model(cfg), tcfg, make_loader(pairs, tcfg.max_tokens, seed=0), tokenizer=vocab,
                           extra=dict(data=asdict(DataSpec("ptb-sample", "dev", 300)))).fit())
    assert (run / "ckpt_0000002.pt").is_file()
    return run

def _latest(run: Path) -> Path: return run / (run / "latest").read_text().strip()

@pytest.fixture(scope="session")
def bad(tmp_path_factory, mt_run, copy_run, parse_run):
    "Checkpoint files of every bad kind, and a real checkpoint of each kind (translation, copy task, parser)."
    d = tmp_path_factory.mktemp("bad")
    raw = _latest(mt_run).read_bytes()
    (d / "truncated.pt").write_bytes(raw[: len(raw) // 2])
    (d / "text.pt").write_text("not a checkpoint\n")
    (d / "empty.pt").write_bytes(b"")
    (d / "binary.pt").write_bytes(b"\xff\xfe\x80\x81 not utf-8, not a zip \x00\xc3" * 8)
    torch.save([1, 2, 3], d / "list.pt")
    (d / "dir.pt").mkdir()
    shutil.copy(_latest(mt_run), d / "translation.pt")
    shutil.copy(_latest(copy_run), d / "copy.pt")
    shutil.copy(_latest(parse_run), d / "parser.pt")
    return d

# ---------------------------------------------------------------- the case context a row's argv builder gets

class Ctx:
    "What a row's argv builder sees: the case directory `tmp` and the session's runs, data and bad files (made on first use)."
    def __init__(self, request, tmp: Path): self.request, self.tmp = request, tmp
    def __getattr__(self, name):
        if name in ("copy_run", "mt_run", "parse_run", "data_dir", "bad", "empty_cache"):
            return self.request.getfixturevalue(name)
        raise AttributeError(name)
    def f(self, name: str, data: bytes | str = b"") -> str:
        "A file in the case directory."
        p = self.tmp / name; p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return str(p)
    def d(self, name: str) -> str:
        "An (empty) directory in the case directory."
        p = self.tmp / name; p.mkdir(parents=True, exist_ok=True); return str(p)
    def copy(self, src: Path, name: str) -> Path:
        "A copy of a directory (a run, the data) in the case directory, to damage."
        dst = self.tmp / name; shutil.copytree(src, dst); return dst
    def blocked(self, name: str = "blocker") -> Path:
        "A plain file: a path under it can be neither created nor written (as root too)."
        p = self.tmp / name; p.write_text("a file, not a directory\n"); return p
    @property
    def good(self) -> str: return self.f("good.de", GOOD_DE)
    @property
    def sents(self) -> str: return self.f("good.txt", "the dog saw a cat .\na man liked the idea .\n")

def truncate(path: Path):
    raw = path.read_bytes(); path.write_bytes(raw[: len(raw) // 2])

def opt(name: str) -> tuple[str, str]:
    "A message may name an option by its field (max_steps=0) or by its flag (--max-steps)."
    return (name, "--" + name.replace("_", "-"))

# ---- at-train
def tr(c, *extra, task="copy"):
    return [task, "--run-dir", str(c.tmp / "run"), *TRAIN_COPY, *extra]

def mt(c, *extra, data=None):
    return ["multi30k", "--data-dir", str(data or c.data_dir), "--run-dir", str(c.tmp / "run"), *TINY_MT, *extra]

def mt_data(c, damage) -> Path:
    "A copy of the tiny Multi30k directory, damaged by `damage(multi30k_dir)`."
    d = c.copy(c.data_dir, "data"); damage(d / "multi30k"); return d

def resumable(c, damage=None) -> Path:
    "A copy of the 2-step copy run, damaged by `damage(run_dir)`."
    run = c.copy(c.copy_run, "run")
    if damage: damage(run)
    return run

def tear_metrics(run: Path):
    with open(run / "metrics.jsonl", "a") as f: f.write('{"step": 2, "loss": 1.2')  # the last write was cut short

def resumed_to_3(c):
    from annotated_transformer.engine.checkpoint import load_checkpoint
    assert load_checkpoint(c.tmp / "run").step == 3, "the resumed run did not reach step 3"
    for line in (c.tmp / "run" / "metrics.jsonl").read_text().splitlines(): json.loads(line)  # no torn line is kept

# ---- at-translate
def tl(c, ck=None, *extra, inp=None):
    return ["--checkpoint", str(ck if ck is not None else c.bad / "translation.pt"), "--input", inp or c.good,
            "--output", str(c.tmp / "out.txt"), "--device", "cpu", "--beam", "2", *extra]

# ---- at-evaluate
def ev(c, run=None, *extra):
    "at-evaluate on a run; its --out already holds results of an earlier evaluation, which a failure must leave alone."
    out = c.tmp / "res"; out.mkdir(exist_ok=True)
    for name in ("results.json", "test.beam.txt", "test.greedy.txt", "metrics.jsonl"): (out / name).write_text("OLD\n")
    return [str(run if run is not None else c.mt_run), "--test", "test", "--out", str(out), "--average", "2",
            "--batch-size", "8", "--beam", "2", *extra]

def mt_copy(c, damage) -> Path:
    run = c.copy(c.mt_run, "run"); damage(run); return run

# ---- at-parse
def pa(c, ck=None, *extra, inp=None):
    "at-parse on sentences, or on --gold trees when extra names them (then no --input unless `inp` is given)."
    source = [] if "--gold" in extra and inp is None else ["--input", inp or c.sents]
    return ["--checkpoint", str(ck if ck is not None else c.parse_run), *source,
            "--output", str(c.tmp / "out.trees"), "--beam", "2", "--device", "cpu", *extra]

GOLD = "(TOP (S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)))\n"

# ---- at-variations
def va(c, *extra, out=None, data=None, rows=("C N=2",)):
    return ["--out", str(out or c.tmp / "grid"), "--data_dir", str(data or c.data_dir), "--rows", *rows, "--steps", "2",
            "--max_tokens", "512", "--vocab_size", "320", "--width", "16", "--n_train", "100", "--n_valid", "4",
            "--beam_size", "1", "--precision", "fp32", *extra]

def grid_with(c, table: str | bytes | None = None, settings: str | None = None, **kw) -> list[str]:
    "A grid directory whose settings.json matches the argv (unless given) and whose table3.csv holds `table`."
    from annotated_transformer.commands.experiments import variations_parser
    from annotated_transformer.engine.grid import GridSettings
    argv = va(c, **kw)
    a = vars(variations_parser().parse_args(argv))
    s = GridSettings(**{k: a[k] for k in asdict(GridSettings())})
    out = Path(a["out"]); out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(settings if settings is not None else json.dumps(asdict(s), indent=1) + "\n")
    if isinstance(table, str): (out / "table3.csv").write_text(table, encoding="utf-8")
    elif isinstance(table, bytes): (out / "table3.csv").write_bytes(table)
    return argv

def table3(torn: bool = False) -> str:
    "A valid table3.csv with the base row; `torn`: then a second row cut off mid-line (an interrupted append)."
    from annotated_transformer.translation.variations import CSV_FIELDS
    rec = dict(row="base", group="base", seed=0, changed="-", n_layers=3, d_model=32, d_ff=128, n_heads=8, d_k=4, dropout=0.1,
               label_smoothing=0.1, positional="sinusoidal", params=60000, dev_ppl=300.5, dev_nll=5.7, dev_bleu=0.0,
               dev_chrf=1.0, final_train_loss=6.0, steps=2, train_seconds=1.0, bleu_seconds=0.5, paper_ppl=4.92,
               paper_bleu=25.8, paper_params_m=65)
    f = io.StringIO(); w = csv.DictWriter(f, CSV_FIELDS, lineterminator="\n"); w.writeheader(); w.writerow(rec)
    return f.getvalue() + ("C N=2,C,0,n_layers=1,1,32,128,8,4,0.1,0.1,sinus" if torn else "")

def grid_resumed(c):
    from annotated_transformer.translation.variations import read_table
    rows = read_table(c.tmp / "grid")
    assert [r["row"] for r in rows] == ["base", "C N=2"] and rows[1]["steps"] == 2, rows

# ---- at-bench
def be(c, *extra):
    return ["--presets", "tiny", "--benchmarks", "decode", "--reps", "1", "--warmup", "0", "--out", str(c.tmp / "bench.json"),
            *extra]

def bench_written(c):
    res = json.loads((c.tmp / "bench.json").read_text())
    assert "decode" in res["results"]["tiny"], res["results"]

# ---------------------------------------------------------------- the table

def row(id, script, argv, code, expect, post=None, marks=()):
    """One case: `argv(ctx)` builds the command line; `code` is the exit status (an int, or "nonzero"); `expect` is what the
    one-line message must contain (a string, or a tuple of alternatives); rows with code 0 run `post(ctx)` afterwards."""
    return pytest.param(script, argv, code, expect, post, id=id, marks=marks)

X = "nonzero"
ROWS = [
    # ======== at-train: the task name and options before it
    row("train-unknown-task", "at-train", lambda c: ["kopy", *TRAIN_COPY], 2, "kopy"),
    row("train-no-task", "at-train", lambda c: TRAIN_COPY, 2, "TASK"),
    row("train-unknown-option-before-task", "at-train", lambda c: ["--stepz", "5", "copy", *TRAIN_COPY], 2, "--stepz"),
    row("train-option-value-missing-before-task", "at-train", lambda c: ["--max-steps", "copy"], 2, opt("max_steps")),
    row("train-option-before-task-ok", "at-train", lambda c: ["--max-steps", "2", *tr(c)], 0, ""),
    row("train-run-dir-empty", "at-train", lambda c: tr(c, "--run-dir", ""), 2, "--run-dir ''"),  # an empty name would write into the working directory
    # numbers: zero, negative, NaN, inf, not a number
    row("train-max-steps-0", "at-train", lambda c: tr(c, "--max-steps", "0"), 2, opt("max_steps")),
    row("train-max-steps-neg", "at-train", lambda c: tr(c, "--max-steps", "-1"), 2, opt("max_steps")),
    row("train-max-steps-nan", "at-train", lambda c: tr(c, "--max-steps", "nan"), 2, opt("max_steps")),
    row("train-max-steps-abc", "at-train", lambda c: tr(c, "--max-steps", "abc"), 2, opt("max_steps")),
    row("train-save-every-neg", "at-train", lambda c: tr(c, "--save-every", "-1"), 2, opt("save_every")),
    row("train-eval-every-neg", "at-train", lambda c: tr(c, "--eval-every", "-1"), 2, opt("eval_every")),
    row("train-log-every-0", "at-train", lambda c: tr(c, "--log-every", "0"), 2, opt("log_every")),
    row("train-keep-last-0", "at-train", lambda c: tr(c, "--keep-last", "0"), 2, opt("keep_last")),
    row("train-max-tokens-0", "at-train", lambda c: tr(c, "--max-tokens", "0"), 2, opt("max_tokens")),
    row("train-accum-steps-0", "at-train", lambda c: tr(c, "--accum-steps", "0"), 2, opt("accum_steps")),
    row("train-lr-factor-nan", "at-train", lambda c: tr(c, "--lr-factor", "nan"), 2, opt("lr_factor")),
    row("train-lr-factor-inf", "at-train", lambda c: tr(c, "--lr-factor", "inf"), 2, opt("lr_factor")),
    row("train-lr-factor-neg", "at-train", lambda c: tr(c, "--lr-factor", "-1"), 2, opt("lr_factor")),
    row("train-warmup-steps-neg", "at-train", lambda c: tr(c, "--warmup-steps", "-5"), 2, opt("warmup_steps")),
    row("train-warmup-steps-0", "at-train", lambda c: tr(c, "--warmup-steps", "0"), 2, opt("warmup_steps")),
    row("train-clip-norm-neg", "at-train", lambda c: tr(c, "--clip-norm", "-1"), 2, opt("clip_norm")),
    row("train-clip-norm-nan", "at-train", lambda c: tr(c, "--clip-norm", "nan"), 2, opt("clip_norm")),
    row("train-dropout-above-1", "at-train", lambda c: tr(c, "--dropout", "1.5"), 2, opt("dropout")),
    row("train-dropout-nan", "at-train", lambda c: tr(c, "--dropout", "nan"), 2, opt("dropout")),
    row("train-label-smoothing-neg", "at-train", lambda c: tr(c, "--label-smoothing", "-0.1"), 2, opt("label_smoothing")),
    row("train-betas-above-1", "at-train", lambda c: tr(c, "--betas", "1.5", "0.98"), 2, opt("betas")),
    row("train-d-model-0", "at-train", lambda c: tr(c, "--d-model", "0"), 2, opt("d_model")),
    row("train-d-model-not-divisible", "at-train", lambda c: tr(c, "--d-model", "30", "--n-heads", "4"), 2, opt("d_model")),
    row("train-n-layers-0", "at-train", lambda c: tr(c, "--n-layers", "0"), 2, opt("n_layers")),
    row("train-copy-n-0", "at-train", lambda c: tr(c, "--copy-n", "0"), 2, opt("copy_n")),
    row("train-copy-max-len-0", "at-train", lambda c: tr(c, "--copy-max-len", "0"), 2, opt("copy_max_len")),
    row("train-precision-xx", "at-train", lambda c: tr(c, "--precision", "xx"), 2, opt("precision")),
    row("train-precision-fp16-on-cpu", "at-train", lambda c: tr(c, "--precision", "fp16"), X, ("fp16",)),
    row("train-device-xx", "at-train", lambda c: tr(c, "--device", "xx"), 2, opt("device")),
    row("train-device-cuda-without-cuda", "at-train", lambda c: tr(c, "--device", "cuda"), X, ("cuda",), marks=no_cuda),
    # the run directory
    # the message names the option to change, not only the path (a bare OSError names just the path)
    row("train-run-dir-is-a-file", "at-train", lambda c: ["copy", *TRAIN_COPY, "--run-dir", str(c.blocked())], X, "choose another --run-dir"),
    row("train-run-dir-unwritable", "at-train", lambda c: ["copy", *TRAIN_COPY, "--run-dir", str(c.blocked() / "run")], X,
        "choose another --run-dir"),
    row("train-multi30k-run-dir-unwritable", "at-train",
        lambda c: [*mt(c), "--run-dir", str(c.blocked() / "run")], X, "choose another --run-dir"),
    # resume
    row("train-resume-truncated-latest-falls-back", "at-train",
        lambda c: (resumable(c, lambda r: truncate(r / "ckpt_0000002.pt")), tr(c, "--resume", "--max-steps", "3"))[1],
        0, "ckpt_0000002.pt", post=resumed_to_3),
    row("train-resume-torn-metrics-line", "at-train",
        lambda c: (resumable(c, tear_metrics), tr(c, "--resume", "--max-steps", "3"))[1], 0, "metrics.jsonl",
        post=resumed_to_3),
    row("train-resume-every-checkpoint-truncated", "at-train",
        lambda c: (resumable(c, lambda r: [truncate(p) for p in r.glob("ckpt_*.pt")]), tr(c, "--resume"))[1], X,
        ("ckpt_0000001.pt", "ckpt_0000002.pt")),
    row("train-new-run-over-a-run", "at-train", lambda c: (resumable(c), tr(c, "--max-steps", "3"))[1], X,
        "continue it with --resume, or choose another --run-dir"),  # not a new run mixed into the old one's metrics and checkpoints
    row("train-resume-over-a-best-model-only", "at-train",  # no ckpt_*.pt to continue: a new run would overwrite best.pt
        lambda c: (resumable(c, lambda r: [p.unlink() if i else p.rename(r / "best.pt")
                                           for i, p in enumerate(sorted(r.glob("ckpt_*.pt"))[::-1])]),
                   tr(c, "--resume", "--max-steps", "3"))[1], X, "best.pt"),
    row("train-resume-another-model", "at-train",
        lambda c: (resumable(c), tr(c, "--resume", "--max-steps", "3", "--d-model", "32"))[1], X, "model config"),
    # data (multi30k layout)
    row("train-multi30k-data-dir-missing", "at-train", lambda c: mt(c, data=c.tmp / "nodata"), X, "nodata"),
    row("train-multi30k-train-not-utf8", "at-train",
        lambda c: mt(c, data=mt_data(c, lambda m: (m / "train.de").write_bytes(b"ein mann\ncaf\xe9 hund\n" * 150))), X,
        "train.de"),
    row("train-multi30k-train-truncated", "at-train",
        lambda c: mt(c, data=mt_data(c, lambda m: (m / "train.de").write_text(
            "".join((m / "train.de").read_text().splitlines(True)[:150])))), X, "train.de"),
    row("train-multi30k-train-is-a-directory", "at-train",
        lambda c: mt(c, data=mt_data(c, lambda m: ((m / "train.de").unlink(), (m / "train.de").mkdir()))), X, "train.de"),
    row("train-multi30k-train-empty", "at-train",
        lambda c: mt(c, data=mt_data(c, lambda m: [(m / f"train.{l}").write_text("") for l in ("de", "en")])), X, "train.de"),
    row("train-multi30k-train-blank-lines", "at-train",
        lambda c: mt(c, data=mt_data(c, lambda m: [(m / f"train.{l}").write_text("\n \n") for l in ("de", "en")])), X,
        "train.de"),
    row("train-multi30k-vocab-size-0", "at-train", lambda c: mt(c, "--vocab-size", "0"), 2, opt("vocab_size")),
    row("train-multi30k-unknown-language", "at-train", lambda c: mt(c, "--src-lang", "xx"), X, "xx"),
    row("train-ptb-sample-data-dir-missing", "at-train",
        lambda c: tr(c, "--data-dir", str(c.tmp / "nodata"), task="ptb-sample"), X, "nodata"),
    row("train-ptb-sample-zip-corrupt", "at-train",
        lambda c: (c.f("pd/ptb_sample/treebank.zip", b"PK\x03\x04 truncated"),
                   tr(c, "--data-dir", str(c.tmp / "pd"), task="ptb-sample"))[1], X, "treebank.zip"),

    # ======== at-translate: the checkpoint
    row("translate-checkpoint-missing", "at-translate", lambda c: tl(c, c.tmp / "missing.pt"), X, "missing.pt"),
    row("translate-checkpoint-empty", "at-translate", lambda c: tl(c, c.bad / "empty.pt"), X, "empty.pt"),
    row("translate-checkpoint-directory", "at-translate", lambda c: tl(c, c.bad / "dir.pt"), X, "dir.pt"),
    row("translate-checkpoint-truncated", "at-translate", lambda c: tl(c, c.bad / "truncated.pt"), X, "truncated.pt"),
    row("translate-checkpoint-text", "at-translate", lambda c: tl(c, c.bad / "text.pt"), X, "text.pt"),
    row("translate-checkpoint-not-utf8-bytes", "at-translate", lambda c: tl(c, c.bad / "binary.pt"), X, "binary.pt"),
    row("translate-checkpoint-list", "at-translate", lambda c: tl(c, c.bad / "list.pt"), X, "list.pt"),
    row("translate-checkpoint-parser", "at-translate", lambda c: tl(c, c.bad / "parser.pt"), X, "parser.pt"),
    row("translate-checkpoint-copy-task", "at-translate", lambda c: tl(c, c.bad / "copy.pt"), X, "copy.pt"),
    row("translate-checkpoint-unreadable", "at-translate",
        lambda c: (shutil.copy(c.bad / "translation.pt", c.tmp / "locked.pt"), os.chmod(c.tmp / "locked.pt", 0),
                   tl(c, c.tmp / "locked.pt"))[2], X, "locked.pt", marks=not_root),
    row("translate-tokenizer-missing", "at-translate",
        lambda c: tl(c, None, "--tokenizer", str(c.tmp / "notok")), X, "notok"),
    row("translate-tokenizer-garbage", "at-translate",
        lambda c: tl(c, None, "--tokenizer", str(Path(c.f("tok/spm.model", b"garbage")).parent)), X, "spm.model"),
    # the input and reference
    row("translate-input-missing", "at-translate", lambda c: tl(c, inp=str(c.tmp / "missing.de")), X, "missing.de"),
    row("translate-input-directory", "at-translate", lambda c: tl(c, inp=c.d("indir")), X, "indir"),
    row("translate-input-not-utf8", "at-translate", lambda c: tl(c, inp=c.f("latin1.de", b"ein hund\nein caf\xe9\n")), X,
        "line 2"),
    row("translate-input-unreadable", "at-translate",
        lambda c: (os.chmod(c.good, 0), tl(c, inp=str(c.tmp / "good.de")))[1], X, "good.de", marks=not_root),
    row("translate-input-too-long-error", "at-translate",
        lambda c: tl(c, None, "--too-long", "error", inp=c.f("long.de", "ein hund\n" + "ein mann " * 80 + "\n")), X,
        "line 2"),
    row("translate-input-too-long-error-names-the-option", "at-translate",
        lambda c: tl(c, None, "--too-long", "error", inp=c.f("long.de", "ein hund\n" + "ein mann " * 80 + "\n")), X,
        "(or use --too-long truncate)"),  # as a user types it: it said too_long='truncate', the Python spelling
    row("translate-reference-missing", "at-translate", lambda c: tl(c, None, "--reference", str(c.tmp / "ref.en")), X,
        "ref.en"),
    row("translate-reference-length-mismatch", "at-translate",
        lambda c: tl(c, None, "--reference", c.f("ref.en", "a man\n")), X, ("ref.en", "reference")),
    row("translate-reference-not-utf8", "at-translate",
        lambda c: tl(c, None, "--reference", c.f("ref.en", b"a man\na caf\xe9\n")), X, "ref.en"),
    # numbers
    row("translate-beam-0", "at-translate", lambda c: tl(c, None, "--beam", "0"), 2, "--beam"),
    row("translate-beam-neg", "at-translate", lambda c: tl(c, None, "--beam", "-2"), 2, "--beam"),
    row("translate-beam-abc", "at-translate", lambda c: tl(c, None, "--beam", "abc"), 2, "--beam"),
    row("translate-beam-out-of-memory", "at-translate", lambda c: tl(c, None, "--beam", "1000000000000"), X,
        "--beam 1000000000000: "),  # refused before it starts, named as typed (it said beam_size=)
    row("translate-alpha-nan", "at-translate", lambda c: tl(c, None, "--alpha", "nan"), 2, "--alpha"),
    row("translate-alpha-inf", "at-translate", lambda c: tl(c, None, "--alpha", "inf"), 2, "--alpha"),
    row("translate-alpha-neg", "at-translate", lambda c: tl(c, None, "--alpha", "-1"), 2, "--alpha"),
    row("translate-batch-size-0", "at-translate", lambda c: tl(c, None, "--batch-size", "0"), 2, "--batch-size"),
    row("translate-batch-size-nan", "at-translate", lambda c: tl(c, None, "--batch-size", "nan"), 2, "--batch-size"),
    row("translate-max-len-a-nan", "at-translate", lambda c: tl(c, None, "--max-len-a", "nan"), 2, "--max-len-a"),
    row("translate-max-len-b-neg", "at-translate", lambda c: tl(c, None, "--max-len-b", "-5"), 2, "--max-len-b"),
    row("translate-too-long-xx", "at-translate", lambda c: tl(c, None, "--too-long", "xx"), 2, "--too-long"),
    row("translate-device-cuda-without-cuda", "at-translate", lambda c: tl(c, None, "--device", "cuda"), X, "cuda",
        marks=no_cuda),
    # the output
    row("translate-output-in-missing-dir", "at-translate",
        lambda c: tl(c, None, "--output", str(c.tmp / "no" / "such" / "out.txt")), 1, ("--output", "out.txt")),
    row("translate-output-is-directory", "at-translate", lambda c: tl(c, None, "--output", c.d("outdir")), 1,
        ("--output", "outdir")),
    row("translate-output-under-a-file", "at-translate",
        lambda c: tl(c, None, "--output", str(c.blocked() / "out.txt")), 1, ("--output", "blocker")),

    row("translate-output-empty", "at-translate", lambda c: tl(c, None, "--output", ""), 2, "--output ''"),
    # ======== at-evaluate: the run directory and its checkpoints
    row("evaluate-run-missing", "at-evaluate", lambda c: ev(c, c.tmp / "norun"), X, "norun"),
    row("evaluate-device-cuda-without-cuda", "at-evaluate", lambda c: ev(c, None, "--device", "cuda"), 2, "cuda", marks=no_cuda),
    row("evaluate-run-empty-directory", "at-evaluate", lambda c: ev(c, c.d("emptyrun")), X, "emptyrun"),
    row("evaluate-run-is-a-file", "at-evaluate", lambda c: ev(c, c.blocked("runfile")), X, "runfile"),
    row("evaluate-last-checkpoint-truncated", "at-evaluate",
        lambda c: ev(c, mt_copy(c, lambda r: truncate(r / "ckpt_0000004.pt"))), X, "ckpt_0000004.pt"),
    row("evaluate-last-checkpoint-empty", "at-evaluate",
        lambda c: ev(c, mt_copy(c, lambda r: (r / "ckpt_0000004.pt").write_bytes(b""))), X, "ckpt_0000004.pt"),
    row("evaluate-last-checkpoint-text", "at-evaluate",
        lambda c: ev(c, mt_copy(c, lambda r: (r / "ckpt_0000004.pt").write_text("text\n"))), X, "ckpt_0000004.pt"),
    row("evaluate-last-checkpoint-list", "at-evaluate",
        lambda c: ev(c, mt_copy(c, lambda r: torch.save([1, 2], r / "ckpt_0000004.pt"))), X, "ckpt_0000004.pt"),
    row("evaluate-copy-task-run", "at-evaluate", lambda c: ev(c, c.copy_run), X, "tokenizer"),
    row("evaluate-parser-run", "at-evaluate",
        lambda c: ev(c, c.parse_run, "--recipe", "multi30k", "--valid", "val", "--data_dir", str(c.data_dir)), X,
        ("tokenizer", "pars")),
    row("evaluate-metrics-missing", "at-evaluate",
        lambda c: ev(c, mt_copy(c, lambda r: (r / "metrics.jsonl").unlink())), X, "metrics.jsonl"),
    row("evaluate-metrics-torn-last-line", "at-evaluate",
        lambda c: ev(c, mt_copy(c, tear_metrics)), 0, "metrics.jsonl",
        post=lambda c: json.loads((c.tmp / "res" / "results.json").read_text())),
    # data
    row("evaluate-test-split-unknown", "at-evaluate", lambda c: [*ev(c), "--test", "nosuch"], X, "nosuch"),
    row("evaluate-recipe-unknown", "at-evaluate", lambda c: ev(c, None, "--recipe", "nosuch"), X, "nosuch"),
    row("evaluate-data-dir-missing", "at-evaluate", lambda c: ev(c, None, "--data_dir", str(c.tmp / "nodata")), X, "nodata"),
    row("evaluate-test-not-utf8", "at-evaluate",
        lambda c: ev(c, None, "--data_dir", str(mt_data(c, lambda m: (m / "test_2016_flickr.en").write_bytes(
            b"a man\ncaf\xe9\n" * 4)))), X, "test_2016_flickr.en"),
    # numbers
    row("evaluate-beam-0", "at-evaluate", lambda c: ev(c, None, "--beam", "0"), 2, "--beam"),
    row("evaluate-beam-neg", "at-evaluate", lambda c: ev(c, None, "--beam", "-1"), 2, "--beam"),
    row("evaluate-alpha-nan", "at-evaluate", lambda c: ev(c, None, "--alpha", "nan"), 2, "--alpha"),
    row("evaluate-alpha-neg", "at-evaluate", lambda c: ev(c, None, "--alpha", "-1"), 2, "--alpha"),
    row("evaluate-batch-size-0", "at-evaluate", lambda c: ev(c, None, "--batch-size", "0"), 2, "--batch-size"),
    row("evaluate-select-beam-0", "at-evaluate", lambda c: ev(c, None, "--select-beam", "0"), 2, "--select-beam"),
    row("evaluate-average-0", "at-evaluate", lambda c: ev(c, None, "--average", "0"), 2, "--average"),
    # outputs
    row("evaluate-out-under-a-file", "at-evaluate", lambda c: [*ev(c), "--out", str(c.blocked() / "res")], 1,
        ("--out", "blocker")),
    row("evaluate-out-is-a-file", "at-evaluate", lambda c: [*ev(c), "--out", str(c.blocked("res.txt"))], 1,
        ("--out", "res.txt")),
    row("evaluate-save-chosen-in-missing-dir", "at-evaluate",
        lambda c: ev(c, None, "--save-chosen", str(c.tmp / "no" / "chosen.pt")), 1, ("--save-chosen", "chosen.pt")),
    row("evaluate-save-chosen-is-directory", "at-evaluate", lambda c: ev(c, None, "--save-chosen", c.d("chosen.pt")), 1,
        ("--save-chosen", "chosen.pt")),

    row("evaluate-out-empty", "at-evaluate", lambda c: [*ev(c), "--out", ""], 2, "--out ''"),
    # ======== at-parse: the checkpoint
    row("parse-checkpoint-missing", "at-parse", lambda c: pa(c, c.tmp / "missing.pt"), X, "missing.pt"),
    row("parse-checkpoint-empty", "at-parse", lambda c: pa(c, c.bad / "empty.pt"), X, "empty.pt"),
    row("parse-checkpoint-empty-directory", "at-parse", lambda c: pa(c, c.bad / "dir.pt"), X, "dir.pt"),
    row("parse-checkpoint-truncated", "at-parse", lambda c: pa(c, c.bad / "truncated.pt"), X, "truncated.pt"),
    row("parse-checkpoint-text", "at-parse", lambda c: pa(c, c.bad / "text.pt"), X, "text.pt"),
    row("parse-checkpoint-not-utf8-bytes", "at-parse", lambda c: pa(c, c.bad / "binary.pt"), X, "binary.pt"),
    row("parse-checkpoint-list", "at-parse", lambda c: pa(c, c.bad / "list.pt"), X, "list.pt"),
    row("parse-checkpoint-translation", "at-parse", lambda c: pa(c, c.bad / "translation.pt"), X, "translation.pt"),
    row("parse-checkpoint-copy-task", "at-parse", lambda c: pa(c, c.bad / "copy.pt"), X, "copy.pt"),
    row("parse-run-latest-truncated", "at-parse",
        lambda c: pa(c, (lambda r: (truncate(_latest(r)), r)[1])(c.copy(c.parse_run, "prun"))), 0, "ckpt_0000002.pt"),  # falls back, naming it
    row("parse-checkpoint-unreadable", "at-parse",
        lambda c: (shutil.copy(c.bad / "parser.pt", c.tmp / "locked.pt"), os.chmod(c.tmp / "locked.pt", 0),
                   pa(c, c.tmp / "locked.pt"))[2], X, "locked.pt", marks=not_root),
    # the input
    row("parse-input-missing", "at-parse", lambda c: pa(c, inp=str(c.tmp / "missing.txt")), X, "missing.txt"),
    row("parse-input-directory", "at-parse", lambda c: pa(c, inp=c.d("indir")), X, "indir"),
    # an empty input, and blank lines, are not errors (issue 63): test_input_without_sentences_*, test_blank_lines_*
    row("parse-input-not-utf8", "at-parse", lambda c: pa(c, inp=c.f("latin1.txt", b"the dog .\ncaf\xe9 .\n")), X, "line 2"),
    row("parse-input-nul", "at-parse", lambda c: pa(c, inp=c.f("nul.txt", b"the dog .\nthe\x00 cat .\n")), X, "line 2"),
    row("parse-input-too-long", "at-parse", lambda c: pa(c, inp=c.f("long.txt", "the dog .\n" + "dog " * 200 + "\n")), X,
        "line 2"),
    row("parse-input-unreadable", "at-parse", lambda c: (os.chmod(c.sents, 0), pa(c, inp=str(c.tmp / "good.txt")))[1], X,
        "good.txt", marks=not_root),
    row("parse-gold-missing", "at-parse", lambda c: pa(c, None, "--gold", str(c.tmp / "missing.clean")), X, "missing.clean"),
    row("parse-gold-empty", "at-parse", lambda c: pa(c, None, "--gold", c.f("empty.clean")), X, "empty.clean"),
    row("parse-gold-truncated-tree", "at-parse", lambda c: pa(c, None, "--gold", c.f("cut.clean", GOLD + GOLD[:30] + "\n")), X,
        "line 2"),
    row("parse-gold-not-utf8", "at-parse", lambda c: pa(c, None, "--gold", c.f("latin1.clean", b"(TOP (S (NN caf\xe9)))\n")), X,
        "latin1.clean"),
    row("parse-gold-directory-without-trees", "at-parse", lambda c: pa(c, None, "--gold", c.d("golddir")), X, "golddir"),
    # numbers
    row("parse-beam-0", "at-parse", lambda c: pa(c, None, "--beam", "0"), 2, "--beam"),
    row("parse-beam-out-of-memory", "at-parse", lambda c: pa(c, None, "--beam", "1000000000000"), X,
        "--beam 1000000000000: "),
    row("parse-beam-nan", "at-parse", lambda c: pa(c, None, "--beam", "nan"), 2, "--beam"),
    row("parse-alpha-nan", "at-parse", lambda c: pa(c, None, "--alpha", "nan"), 2, "--alpha"),
    row("parse-alpha-inf", "at-parse", lambda c: pa(c, None, "--alpha", "inf"), 2, "--alpha"),
    row("parse-alpha-neg", "at-parse", lambda c: pa(c, None, "--alpha", "-1"), 2, "--alpha"),
    row("parse-batch-size-0", "at-parse", lambda c: pa(c, None, "--batch-size", "0"), 2, "--batch-size"),
    row("parse-max-len-a-nan", "at-parse", lambda c: pa(c, None, "--max-len-a", "nan"), 2, "--max-len-a"),
    row("parse-max-len-b-neg", "at-parse", lambda c: pa(c, None, "--max-len-b", "-5"), 2, "--max-len-b"),
    row("parse-device-cuda-without-cuda", "at-parse", lambda c: pa(c, None, "--device", "cuda"), 2, "cuda", marks=no_cuda),
    # the output
    row("parse-output-in-missing-dir", "at-parse", lambda c: pa(c, None, "--output", str(c.tmp / "no" / "out.trees")), 1,
        "--output"),
    row("parse-output-is-directory", "at-parse", lambda c: pa(c, None, "--output", c.d("outdir")), 1, "--output"),

    row("parse-output-empty", "at-parse", lambda c: pa(c, None, "--output", ""), 2, "--output ''"),
    # ======== at-variations: settings
    row("variations-steps-0", "at-variations", lambda c: va(c, "--steps", "0"), 2, "--steps"),
    row("variations-steps-neg", "at-variations", lambda c: va(c, "--steps", "-1"), 2, "--steps"),
    row("variations-steps-nan", "at-variations", lambda c: va(c, "--steps", "nan"), 2, "--steps"),
    row("variations-max-tokens-0", "at-variations", lambda c: va(c, "--max_tokens", "0"), 2, ("--max_tokens", "--max-tokens")),
    row("variations-lr-factor-nan", "at-variations", lambda c: va(c, "--lr_factor", "nan"), 2, ("--lr_factor", "--lr-factor")),
    row("variations-warmup-steps-neg", "at-variations", lambda c: va(c, "--warmup_steps", "-1"), 2, ("--warmup_steps", "--warmup-steps")),
    row("variations-beam-size-0", "at-variations", lambda c: va(c, "--beam_size", "0"), 2, ("--beam_size", "--beam-size")),
    row("variations-alpha-nan", "at-variations", lambda c: va(c, "--alpha", "nan"), 2, "--alpha"),
    row("variations-width-0", "at-variations", lambda c: va(c, "--width", "0"), 2, "--width"),
    row("variations-width-not-a-divisor", "at-variations", lambda c: va(c, "--width", "3"), 2, "--width"),
    row("variations-vocab-size-0", "at-variations", lambda c: va(c, "--vocab_size", "0"), 2, ("--vocab_size", "--vocab-size")),
    row("variations-n-train-neg", "at-variations", lambda c: va(c, "--n_train", "-1"), 2, ("--n_train", "--n-train")),
    row("variations-device-xx", "at-variations", lambda c: va(c, "--device", "xx"), 2, "--device"),
    row("variations-precision-xx", "at-variations", lambda c: va(c, "--precision", "xx"), 2, "--precision"),
    row("variations-rows-unknown", "at-variations", lambda c: va(c, rows=("nope",)), 2, "nope"),
    # the output directory and what is already in it
    row("variations-out-under-a-file", "at-variations", lambda c: va(c, out=c.blocked() / "grid"), 1, ("--out", "blocker")),
    row("variations-out-is-a-file", "at-variations", lambda c: va(c, out=c.blocked("grid.txt")), 1, ("--out", "grid.txt")),
    row("variations-out-empty", "at-variations", lambda c: ["--out", "", *va(c)[2:]], 2, "--out ''"),
    row("variations-settings-differ", "at-variations", lambda c: [*grid_with(c, table3()), "--steps", "3"], X,
        "settings.json"),
    row("variations-settings-torn", "at-variations", lambda c: grid_with(c, table3(), settings='{"steps": 2, "max_'), X,
        "settings.json"),
    row("variations-table-not-utf8", "at-variations", lambda c: grid_with(c, table3().encode() + b"caf\xe9,x\n"), X,
        "table3.csv"),
    row("variations-table-is-directory", "at-variations",
        lambda c: (lambda argv: ((c.tmp / "grid" / "table3.csv").mkdir(), argv)[1])(grid_with(c)), X, "table3.csv"),
    row("variations-table-torn-last-row", "at-variations", lambda c: grid_with(c, table3(torn=True), rows=("base", "C N=2")),
        0, "table3.csv", post=grid_resumed),
    # data
    row("variations-data-dir-missing", "at-variations", lambda c: va(c, data=c.tmp / "nodata"), X, "nodata"),
    row("variations-train-not-utf8", "at-variations",
        lambda c: va(c, data=mt_data(c, lambda m: (m / "train.en").write_bytes(b"a man\ncaf\xe9\n" * 150))), X, "train.en"),

    # ======== at-bench
    row("bench-reps-0", "at-bench", lambda c: be(c, "--reps", "0"), 2, "--reps"),
    row("bench-reps-neg", "at-bench", lambda c: be(c, "--reps", "-1"), 2, "--reps"),
    row("bench-reps-nan", "at-bench", lambda c: be(c, "--reps", "nan"), 2, "--reps"),
    row("bench-reps-abc", "at-bench", lambda c: be(c, "--reps", "abc"), 2, "--reps"),
    row("bench-warmup-neg", "at-bench", lambda c: be(c, "--warmup", "-1"), 2, "--warmup"),
    row("bench-threads-neg", "at-bench", lambda c: be(c, "--threads", "-1"), 2, "--threads"),
    row("bench-batch-size-0", "at-bench", lambda c: be(c, "--batch-size", "0"), 2, "--batch-size"),
    row("bench-src-len-0", "at-bench", lambda c: be(c, "--src-len", "0"), 2, "--src-len"),
    row("bench-seqlens-0", "at-bench", lambda c: be(c, "--seqlens", "0,16"), 2, "--seqlens"),
    row("bench-decode-batches-abc", "at-bench", lambda c: be(c, "--decode-batches", "a,b"), 2, "--decode-batches"),
    row("bench-scaling-tokens-0", "at-bench", lambda c: be(c, "--scaling-tokens", "0"), 2, "--scaling-tokens"),
    row("bench-peak-tflops-nan", "at-bench", lambda c: be(c, "--peak-tflops", "nan"), 2, "--peak-tflops"),
    row("bench-peak-tflops-0", "at-bench", lambda c: be(c, "--peak-tflops", "0"), 2, "--peak-tflops"),
    row("bench-preset-unknown", "at-bench", lambda c: be(c, "--presets", "huge"), 2, "--presets"),
    row("bench-presets-empty", "at-bench", lambda c: be(c, "--presets", ","), 2, "--presets"),
    row("bench-benchmark-unknown", "at-bench", lambda c: be(c, "--benchmarks", "warp"), 2, "--benchmarks"),
    row("bench-precision-fp16", "at-bench", lambda c: be(c, "--precisions", "fp16"), 2, "--precisions"),
    row("bench-device-xx", "at-bench", lambda c: be(c, "--device", "xx"), 2, "--device"),
    row("bench-device-cuda-without-cuda", "at-bench", lambda c: be(c, "--device", "cuda"), 2, "--device", marks=no_cuda),
    row("bench-out-under-a-file", "at-bench", lambda c: be(c, "--out", str(c.blocked() / "bench.json")), 1,
        ("--out", "blocker")),
    row("bench-out-is-directory", "at-bench", lambda c: be(c, "--out", c.d("benchdir")), 1, ("--out", "benchdir")),
    row("bench-tiny-run-succeeds", "at-bench", lambda c: be(c), 0, "", post=bench_written),
]

# ---- issue 27: faults that used to get through (more, that need a second process or a full disk, in test_faults.py)
def flip_bytes(ck: Path, n: int = 64):
    "Flip n bytes of the first floating tensor, where its bytes sit in the file: torch still loads it, changed."
    raw, t = ck.read_bytes(), next(v for v in torch.load(ck, weights_only=True)["model"].values() if v.is_floating_point())
    at = raw.find(t.numpy().tobytes()[:256]); assert at > 0
    ck.write_bytes(raw[:at] + bytes(b ^ 0xFF for b in raw[at:at + n]) + raw[at + n:])

def nan_weights(ck: Path):
    "Rewrite a checkpoint, with a valid checksum, whose weights are NaN (a run that diverged)."
    from annotated_transformer.engine.checkpoint import load_checkpoint, write_checkpoint
    d = load_checkpoint(ck)
    d.weights = {k: v.clone().fill_(float("nan")) if v.is_floating_point() else v for k, v in d.weights.items()}
    write_checkpoint(d, ck)

def metrics_line(line: str):
    "Put `line` before the last record of a run's metrics.jsonl."
    def damage(run: Path):
        lines = (run / "metrics.jsonl").read_text().splitlines(True)
        (run / "metrics.jsonl").write_text("".join(lines[:-1]) + line + "\n" + lines[-1])
    return damage

def finished_untouched(c):
    from annotated_transformer.engine.runs import read_metrics
    assert sum("val_loss" in r for r in read_metrics(c.tmp / "run")) == 1, "a second validation record was appended"
    assert not json.loads((c.tmp / "run" / "run.json").read_text())["resumed"], "run.json records a resume that did nothing"

def bad_copy(c, damage, name="ck.pt") -> str:
    "A copy of the translation checkpoint, damaged."
    p = c.tmp / name; shutil.copy(c.bad / "translation.pt", p); damage(p); return str(p)

ROWS += [
    row("train-resume-flipped-bytes-falls-back", "at-train",
        lambda c: (resumable(c, lambda r: flip_bytes(r / "ckpt_0000002.pt")), tr(c, "--resume", "--max-steps", "3"))[1],
        0, "ckpt_0000002.pt", post=resumed_to_3),
    row("train-resume-nan-weights-falls-back", "at-train",
        lambda c: (resumable(c, lambda r: nan_weights(r / "ckpt_0000002.pt")), tr(c, "--resume", "--max-steps", "3"))[1],
        0, "NaN", post=resumed_to_3),
    row("train-resume-another-task", "at-train", lambda c: (resumable(c), mt(c, "--resume", "--max-steps", "3"))[1], X,
        "at-train copy"),
    row("train-resume-finished-run", "at-train", lambda c: (resumable(c), tr(c, "--resume"))[1], 0, "nothing to do",
        post=finished_untouched),
    row("train-resume-metrics-json-list", "at-train",
        lambda c: (resumable(c, metrics_line("[1, 2]")), tr(c, "--resume", "--max-steps", "3"))[1], X, "metrics.jsonl, line"),
    row("train-resume-metrics-record-without-step", "at-train",
        lambda c: (resumable(c, metrics_line('{"loss": 1.0, "time": 1.0}')), tr(c, "--resume", "--max-steps", "3"))[1], X,
        "'step'"),
    row("translate-checkpoint-flipped-bytes", "at-translate", lambda c: tl(c, bad_copy(c, flip_bytes)), X, "checksum"),
    row("translate-checkpoint-nan-weights", "at-translate", lambda c: tl(c, bad_copy(c, nan_weights)), X, "NaN"),
    row("evaluate-average-more-than-kept", "at-evaluate", lambda c: ev(c, None, "--average", "1", "10"), 2, "--average 10"),
    row("parse-gold-and-input", "at-parse", lambda c: pa(c, None, "--gold", c.f("gold.mrg", GOLD), inp=c.sents), 2, "--gold"),
    row("variations-depth-not-dividing", "at-variations", lambda c: va(c, "--depth", "6"), 2, "--depth"),
    row("bench-data-dir-missing", "at-bench", lambda c: be(c, "--data-dir", str(c.tmp / "nodata")), 2, "--data-dir"),
    # an output that is an input: it was overwritten by what was read from it
    row("translate-output-is-input", "at-translate", lambda c: tl(c, None, "--output", c.good), 2, "is the --input file"),
    row("translate-output-is-reference", "at-translate",
        lambda c: tl(c, None, "--reference", c.f("ref.en", "a dog runs .\n"), "--output", str(c.tmp / "ref.en")), 2,
        "is the --reference file"),
    row("parse-output-is-input", "at-parse", lambda c: pa(c, None, "--output", c.sents), 2, "is the --input file"),
    # empty names: they read stdin, or were skipped as if not given
    row("translate-input-empty-name", "at-translate", lambda c: tl(c, None, "--input", ""), 2, "--input ''"),
    row("translate-reference-empty-name", "at-translate", lambda c: tl(c, None, "--reference", ""), 2, "--reference ''"),
    row("translate-checkpoint-empty-name", "at-translate", lambda c: tl(c, ""), 2, "--checkpoint ''"),
    row("parse-gold-empty-name", "at-parse", lambda c: pa(c, None, "--gold", ""), 2, "--gold ''"),
    row("evaluate-run-dir-empty-name", "at-evaluate", lambda c: ev(c, ""), 2, "run_dir ''"),
    row("bench-checkpoint-empty-name", "at-bench", lambda c: be(c, "--checkpoint", ""), 2, "--checkpoint ''"),
    # values that crashed in a library, or ran and then failed
    row("translate-alpha-huge", "at-translate", lambda c: tl(c, None, "--alpha", "1e5"), X, "--alpha"),
    row("translate-max-len-zero", "at-translate", lambda c: tl(c, None, "--max-len-a", "0", "--max-len-b", "0"), X,
        "--max-len-b"),
    row("translate-max-len-a-huge", "at-translate", lambda c: tl(c, None, "--max-len-a", "1e30"), 0, "translated"),
    row("train-pad-idx-outside-vocab", "at-train", lambda c: tr(c, "--pad-idx", "99"), 2, opt("pad_idx")),
    row("train-bos-idx-neg", "at-train", lambda c: tr(c, "--bos-idx", "-3"), 2, opt("bos_idx")),
    row("train-copy-symbols-above-vocab", "at-train", lambda c: tr(c, "--copy-symbols", "100"), 2, "--copy-symbols 100"),
    row("train-seed-neg", "at-train", lambda c: tr(c, "--seed", "-1"), 2, opt("seed")),
    row("train-seed-huge", "at-train", lambda c: tr(c, "--seed", "99999999999999999999"), 2, opt("seed")),
    row("train-run-dir-holds-results", "at-train",
        lambda c: ((c.tmp / "run").mkdir(), (c.tmp / "run" / "results.json").write_text("{}\n"), tr(c))[2], X, "results.json"),
    row("evaluate-languages-not-the-runs", "at-evaluate", lambda c: ev(c, None, "--src-lang", "en", "--tgt-lang", "de"), X,
        "the run trained de->en"),  # it decoded English with the German->English model and wrote results.json
    row("variations-run-root-is-a-file", "at-variations", lambda c: va(c, "--run-root", c.good), X, "--run-root"),
    row("evaluate-ship-into-a-file", "at-evaluate",
        lambda c: (c.request.getfixturevalue("monkeypatch").setenv("AT_PRETRAINED_DIR", c.good), ev(c, None, "--ship", "newm"))[1],
        X, "$AT_PRETRAINED_DIR"),  # it decoded for minutes, wrote --out, then failed to ship
    row("bench-benchmarks-none-named", "at-bench", lambda c: be(c, "--benchmarks", ",,"), 2, "--benchmarks ',,'"),
    row("bench-threads-above-cpus", "at-bench", lambda c: be(c, "--threads", "100000"), 2, "--threads 100000"),
    row("bench-seqlens-above-max-len", "at-bench",
        lambda c: ["--presets", "tiny", "--benchmarks", "seqlen", "--seqlens", "16,512", "--out", str(c.tmp / "b.json")], 2,
        "--seqlens 512"),
    row("train-keep-best-not-a-metric", "at-train", lambda c: tr(c, "--keep-best", "val_acc"), X,
        "keep_best='val_acc'"),  # refused at the first validation, after minutes of training
    row("variations-seeds-empty-item", "at-variations", lambda c: va(c, "--seeds", "1,,2"), 2, "--seeds"),  # ran 1 and 2
    row("bench-compile-threads-trailing-comma", "at-bench", lambda c: be(c, "--compile-threads", "1,"), 2, "--compile-threads"),
    row("bench-recipe-without-checkpoint", "at-bench", lambda c: be(c, "--recipe", "multi30k"), 2,
        "--recipe multi30k"),  # it was ignored: only the ct2 benchmark, which needs --checkpoint, reads a recipe
    row("bench-recipe-empty", "at-bench", lambda c: be(c, "--recipe", ""), 2, "--recipe ''"),  # said '--recipe : only ...'
    row("bench-recipe-unknown", "at-bench", lambda c: be(c, "--checkpoint", c.good, "--recipe", "nope"), 2,
        "--recipe"),  # refused only after every other benchmark had run
]

# ---------------------------------------------------------------- running a row and judging what the user saw

def run_in_process(script: str, argv: list[str], capfd) -> tuple[int, str, str, list[str]]:
    "The entry function of `script` (ENTRY), run in-process by conftest.run_entry."
    return run_entry(entry(script), argv, capfd)

def judge(script: str, rc: int, out: str, err: str, code, expect, problems: list[str]) -> list[str]:
    "Problems with a finished run: status, traceback, the one-line message and what it names."
    problems = list(problems)
    expect = (expect,) if isinstance(expect, str) else tuple(expect)
    if "Traceback (most recent call last)" in err and not any(p.startswith("traceback") for p in problems):
        tb = [l for l in err.splitlines() if l.strip()]
        problems.append(f"traceback reached the user: {tb[-1][:200] if tb else ''}")
    if code == 0:
        if rc != 0: problems.append(f"exit {rc}, expected 0; stderr tail: {err.strip()[-300:]!r}")
        if expect and not any(e in out + err for e in expect): problems.append(f"no message naming {expect}")
        if any(l.lstrip().startswith(("{'settings'", "{'results'", '{"settings"')) for l in err.splitlines()):
            problems.append("a result dict on stderr")
        return problems
    if code == X:
        if rc == 0: problems.append("exit 0 (the bad input was accepted)")
    elif rc != code: problems.append(f"exit {rc}, expected {code}")
    if any(p.startswith("traceback") for p in problems): return problems  # no message of its own to judge
    lines = [l for l in err.splitlines() if l.strip()]
    if not lines: problems.append("nothing on stderr"); return problems
    if len(lines) != 1: problems.append(f"{len(lines)} lines on stderr, expected the one message: {[l[:120] for l in lines[:4]]}")
    last = lines[-1]
    if not last.startswith(f"{script}: "): problems.append(f"the last stderr line does not start with '{script}: ': {last[:200]!r}")
    if not any(e in last for e in expect): problems.append(f"the message does not name {expect}: {last[:200]!r}")
    return problems

def snapshot(root: Path) -> dict[str, str]:
    "Every file under `root` -> a digest of its bytes (unreadable files by their size), and every directory -> 'directory'."
    out = {}
    for p in root.rglob("*"):
        if p.is_dir() and not p.is_symlink(): out[p.relative_to(root).as_posix() + "/"] = "directory"  # an empty one left behind counts
        if p.is_file() and not p.is_symlink():
            try: out[p.relative_to(root).as_posix()] = hashlib.sha1(p.read_bytes()).hexdigest()
            except OSError: out[p.relative_to(root).as_posix()] = f"unreadable:{p.stat().st_size}"
    return out

def left_behind(before: dict, after: dict) -> list[str]:
    "New, changed or removed files after a run that failed (a rejected command must leave everything as it was)."
    problems = []
    new = sorted(set(after) - set(before))
    if new: problems.append(f"files or directories left behind: {new[:6]}{' ...' if len(new) > 6 else ''}")
    changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
    if changed: problems.append(f"files overwritten: {changed[:6]}")
    gone = sorted(set(before) - set(after))
    if gone: problems.append(f"files removed: {gone[:6]}")
    return problems

@pytest.fixture
def case(request, tmp_path, monkeypatch, empty_cache):
    "The case directory (inputs and outputs), the working directory inside it, and no Multi30k download cache."
    monkeypatch.setenv("AT_CACHE_DIR", str(empty_cache))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # default outputs (runs/, results/bench/) land in the case directory
    return Ctx(request, tmp_path)

@pytest.mark.parametrize("script,argv,code,expect,post", ROWS)
def test_bad_input(case, capfd, script, argv, code, expect, post):
    args = [str(a) for a in argv(case)]
    capfd.readouterr()  # the builders' own output (fixtures training their runs) is not the script's
    before = snapshot(case.tmp)
    rc, out, err, problems = run_in_process(script, args, capfd)
    problems = judge(script, rc, out, err, code, expect, problems)
    after = snapshot(case.tmp)
    tmp = sorted(k for k in set(after) - set(before) if k.endswith((".tmp", ".part")))
    if tmp: problems.append(f"temporary files left behind: {tmp}")
    if code == 0:
        if not problems and post is not None:
            try: post(case)
            except Exception as e: problems.append(f"after the run: {type(e).__name__}: {e}")
    else: problems += left_behind(before, after)
    assert not problems, f"{script} {' '.join(args)}\n  " + "\n  ".join(problems) + f"\n--- stderr tail:\n{err[-1500:]}"

# ---------------------------------------------------------------- the console-script wrapper itself, in a subprocess

SUBPROCESS_ROWS = ["train-run-dir-unwritable", "translate-checkpoint-truncated", "evaluate-last-checkpoint-truncated",
                   "parse-checkpoint-text", "variations-rows-unknown", "bench-reps-0", "bench-tiny-run-succeeds"]
QUICK_SUBPROCESS_ROWS = {"parse-checkpoint-text", "bench-tiny-run-succeeds"}  # an error and a success; the rest are `slow`
_BY_ID = {p.id: p for p in ROWS}

@pytest.mark.parametrize("row_id", [r if r in QUICK_SUBPROCESS_ROWS else pytest.param(r, marks=pytest.mark.slow)
                                    for r in SUBPROCESS_ROWS])
def test_console_script_prints_no_traceback(case, row_id, empty_cache):
    "The same rows through `python -c 'sys.exit(entry())'`: what a user of the installed command sees."
    script, argv, code, expect, post = _BY_ID[row_id].values
    args = [str(a) for a in argv(case)]
    before = snapshot(case.tmp)
    r = subprocess.run(console_command(script) + args, capture_output=True, text=True, timeout=300, cwd=case.tmp / "cwd",
                       env=subprocess_env(empty_cache))
    problems = judge(script, r.returncode, r.stdout, r.stderr, code, expect, [])
    if code != 0: problems += left_behind(before, snapshot(case.tmp))
    elif post is not None and not problems: post(case)
    assert not problems, f"{script} {' '.join(args)}\n  " + "\n  ".join(problems) + f"\n--- stderr tail:\n{r.stderr[-1500:]}"

# ---------------------------------------------------------------- an interrupted at-train saves, says so and exits 128 + signal

@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)],
                         ids=["SIGINT", "SIGTERM"])  # SIGTERM is quick in test_train (the Trainer's own handler)
def test_interrupted_train_saves_and_exits_nonzero(tmp_path, empty_cache, sig, code):
    from annotated_transformer.engine.checkpoint import load_checkpoint
    run = tmp_path / "run"
    cmd = console_command("at-train") + ["copy", "--run-dir", str(run), "--max-steps", "100000", "--save-every", "5",
                                         "--log-every", "1", "--eval-every", "0", "--copy-n", "500", "--n-valid", "10",
                                         "--no-progress", "--device", "cpu", "--precision", "fp32",
                                         "--compile", "off"]  # a run stopped by a signal, not long: no compile trial
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=subprocess_env(empty_cache))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (run / "latest").is_file():  # the first checkpoint: training is under way
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert (run / "latest").is_file(), "no checkpoint within 120 s"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    problems = []
    if "Traceback" in err: problems.append(f"traceback: {err.strip().splitlines()[-1][:200]}")
    if proc.returncode != code: problems.append(f"exit {proc.returncode}, expected {code} (128 + {sig.name})")
    if "stopped" not in (out + err).lower(): problems.append("no message saying training stopped")
    step = load_checkpoint(run).step
    logged = max(json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip())
    if step != logged: problems.append(f"the last checkpoint is step {step} but training reached step {logged}")
    if list(run.glob("*.tmp")): problems.append(f"temporary files left: {list(run.glob('*.tmp'))}")
    assert not problems, "\n  ".join(problems) + f"\n--- stdout tail:\n{out[-600:]}\n--- stderr tail:\n{err[-600:]}"


@pytest.mark.slow  # minutes on a busy CPU: the grid prepares its data before a row trains
def test_variations_stopped_by_sigterm_exits_143(tmp_path, data_dir, empty_cache):
    "at-variations exits 143 on SIGTERM, as at-train does (it exited 130, the status of Ctrl-C), and says what stopped it."
    out = tmp_path / "grid"
    cmd = console_command("at-variations") + va(types.SimpleNamespace(tmp=tmp_path, data_dir=data_dir), "--device", "cpu",
                                                 rows=("base",))
    cmd[cmd.index("--steps") + 1] = "100000"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=subprocess_env(empty_cache))
    try:
        deadline = time.time() + 180
        while time.time() < deadline and not list(out.glob("runs/*/metrics.jsonl")):  # a row is training
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert proc.returncode == 143 and "at-variations: terminated (SIGTERM)" in err and "Traceback" not in err, (proc.returncode, err[-1500:])


# ---------------------------------------------------------------- issue 63: a full stdout; input with blank lines or no sentence

WRITERS = {"at-translate": tl, "at-parse": pa}  # the two scripts that write one output line per input line

def to_stdout(argv: list[str]) -> list[str]:
    "The same command line without its --output: the results go to stdout."
    i = argv.index("--output"); return argv[:i] + argv[i + 2:]

def message_lines(err: str) -> list[str]: return [l for l in err.splitlines() if l.strip()]

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (Linux has one): no way to fill stdout")
@pytest.mark.parametrize("script", list(WRITERS))
def test_a_full_stdout_is_one_line_naming_stdout(case, script, empty_cache):
    "The installed command with stdout on /dev/full: one line naming stdout and how much got there, exit 1, nothing else."
    args = [str(a) for a in to_stdout(WRITERS[script](case))]
    with open("/dev/full", "w") as full:
        r = subprocess.run(console_command(script) + args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
                           cwd=case.tmp / "cwd", env=subprocess_env(empty_cache))
    expect = f"{script}: error: writing to stdout failed after 0 of 2 lines: No space left on device"
    assert (r.returncode, message_lines(r.stderr)) == (1, [expect]), r.stderr  # no "Exception ignored" at exit, no traceback

class FullAfter(io.StringIO):
    "A stdout that takes `n` lines, then fails as a full disk does."
    def __init__(self, n: int): super().__init__(); self.n = n
    def write(self, s):
        if self.getvalue().count("\n") >= self.n: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(s)

@pytest.mark.parametrize("script", list(WRITERS))
def test_a_stdout_that_fills_up_counts_the_lines_written(case, capfd, monkeypatch, script):
    monkeypatch.setattr(sys, "stdout", FullAfter(1))
    rc, out, err, problems = run_in_process(script, to_stdout(WRITERS[script](case)), capfd)
    assert not problems and rc == 1, (problems, err)
    assert message_lines(err) == [f"{script}: error: writing to stdout failed after 1 of 2 lines: No space left on device"], err

def run_on(case, capfd, monkeypatch, script: str, text: str, where: str) -> tuple[int, str, str]:
    "Run `script` on `text` from a file or stdin, writing to a file or stdout: (exit status, the output, stderr)."
    argv = [str(a) for a in WRITERS[script](case, inp=case.f("in.txt", text) if where == "file" else "-")]
    out_file = Path(argv[argv.index("--output") + 1])
    out_file.unlink(missing_ok=True)
    if where == "stdin":
        argv = to_stdout(argv)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))
    rc, out, err, problems = run_in_process(script, argv, capfd)
    assert not problems, problems
    if where == "file" and rc == 0:
        assert out == "", out
        out = out_file.read_text(encoding="utf-8")
    return rc, out, err

@pytest.mark.parametrize("where", ["file", "stdin"])
@pytest.mark.parametrize("text", ["", "\n", " \n\t\n\n"], ids=["empty", "one-blank-line", "blank-lines"])
@pytest.mark.parametrize("script", list(WRITERS))
def test_input_without_sentences_exits_0_with_a_note(case, capfd, monkeypatch, script, text, where):
    "Nothing to do is not an error: one blank output line per input line (none for an empty input), one note on stderr."
    rc, out, err = run_on(case, capfd, monkeypatch, script, text, where)
    assert rc == 0, err
    assert out == "\n" * text.count("\n"), repr(out)
    notes = message_lines(err)
    assert len(notes) == 1 and notes[0].startswith(f"{script}: ") and "no sentences" in notes[0], notes

@pytest.mark.parametrize("where", ["file", "stdin"])
@pytest.mark.parametrize("script", list(WRITERS))
def test_blank_lines_are_skipped_and_keep_their_place(case, capfd, monkeypatch, script, where):
    "A blank line is not translated or parsed: it gets a blank output line, and the sentences get what they get alone."
    sents = "ein hund sitzt\nein mann läuft auf dem gras\n" if script == "at-translate" else "the dog saw a cat .\na man liked the idea .\n"
    rc, alone, _ = run_on(case, capfd, monkeypatch, script, sents, where)
    assert rc == 0 and len(alone.splitlines()) == 2
    first, second = sents.splitlines()
    rc, out, err = run_on(case, capfd, monkeypatch, script, f"\n{first}\n  \n\t\n{second}\n", where)
    assert rc == 0, err
    assert out.split("\n") == ["", alone.splitlines()[0], "", "", alone.splitlines()[1], ""], repr(out)
    summary = message_lines(err)
    assert len(summary) == 1 and summary[0].endswith("; 3 blank lines skipped"), summary

def blank_rule(script: str, capfd) -> str:
    "The paragraph of `script --help` about blank lines, its whitespace normalised."
    rc, out, err, problems = run_in_process(script, ["--help"], capfd)
    assert rc == 0 and not problems, err
    rule = [" ".join(p.split()) for p in out.split("\n\n") if "blank" in p]
    assert len(rule) == 1, f"{script} --help: no one paragraph on blank lines:\n{out}"
    return rule[0]

def test_both_help_texts_state_the_same_blank_line_rule(capfd):
    rule = blank_rule("at-translate", capfd)
    assert rule == blank_rule("at-parse", capfd)
    assert all(w in rule for w in ("blank output line", "no sentence", "exits 0")), rule



# ---- an option given without its value
@pytest.mark.parametrize("script, argv, option", [
    ("at-variations", ["--out", "OUT", "--rows"], "--rows"),
    ("at-evaluate", ["RUN", "--test", "test", "--out", "OUT", "--average"], "--average"),
])
def test_an_option_without_its_value_is_a_bad_option(script, argv, option, capfd, tmp_path):
    "`--rows` or `--average` with no value is refused (exit 2, naming it), not read as an empty list: `--rows` alone ran all 20 rows"
    argv = [str(tmp_path / a) if a in ("OUT", "RUN") else a for a in argv]
    rc, out, err, problems = run_entry(entry(script), argv, capfd)
    assert rc == 2 and option in err and "expected at least one argument" in err and not problems, (rc, err, problems)
    assert not (tmp_path / "OUT").exists(), "a refused command left its output directory behind"


# ---- issue 72: an over-long line's notice is one line naming the option as typed; an endless input streams

def test_a_truncated_line_is_one_warning_line(case, capfd):
    "The notice of a truncated line: one `warning:` line naming the line and the option as typed, not Python's two-line warning."
    argv = tl(case, None, inp=case.f("long.de", "ein hund\n" + "ein mann " * 80 + "\n"))
    rc, out, err, problems = run_in_process("at-translate", argv, capfd)
    lines = message_lines(err)
    assert rc == 0 and not problems, (problems, err)
    assert len(lines) == 2 and lines[1].startswith("at-translate: 2 sentences translated"), lines
    assert re.fullmatch(r"warning: input line 2: \d+ tokens \+ EOS exceed the model's max_len=64; truncated to its first 63 "
                        r"tokens \(--too-long error refuses such lines\)", lines[0]), lines[0]

class EndlessInput(io.RawIOBase):
    """A stdin that never ends (`yes LINE`): it counts the bytes read and refuses to give more than `limit`, so that a command
    that reads all its input before writing fails here instead of running out of memory."""
    def __init__(self, line: str, limit: int = 4 << 20):
        self.line, self.limit, self.read_bytes = line.encode(), limit, 0
    def readable(self): return True
    def readinto(self, b):
        if self.read_bytes >= self.limit: raise MemoryError(f"read {self.read_bytes} bytes of an endless input before writing")
        data = (self.line * (len(b) // len(self.line) + 1))[:len(b)]
        b[:len(data)] = data; self.read_bytes += len(data)
        return len(data)

@pytest.mark.parametrize("script", list(WRITERS))
def test_an_endless_input_streams_in_order(case, capfd, monkeypatch, script):
    """`yes | at-translate` wrote nothing and grew to 2.2 GiB: it read all its input first. Now a chunk of lines is read,
    written and flushed, then the next: here stdout fills up after 5 lines, which must come after reading little input,
    in the input's order (line 4 is blank, and stays so), each what the sentence gets alone."""
    sentence = "ein hund sitzt" if script == "at-translate" else "the dog saw a cat ."
    argv = to_stdout(WRITERS[script](case, None, "--batch-size", "2", inp="-"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(f"{sentence}\n".encode()))))
    rc, alone, err, problems = run_in_process(script, argv, capfd)
    assert rc == 0 and not problems, err
    src = EndlessInput(f"{sentence}\n{sentence}\n{sentence}\n\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(src)))
    monkeypatch.setattr(sys, "stdout", FullAfter(5))
    rc, _, err, problems = run_in_process(script, argv, capfd)
    assert not problems and rc == 1 and message_lines(err) == [
        f"{script}: error: writing to stdout failed after 5 of 6 lines: No space left on device"], err
    assert sys.stdout.getvalue() == f"{alone}{alone}{alone}\n{alone}", sys.stdout.getvalue()
    assert src.read_bytes <= 64 << 10, src.read_bytes  # the chunks written and a read-ahead buffer or two, not the whole input
