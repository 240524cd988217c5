"""Your own data: `at-train translate --data-dir DIR --src-lang SRC --tgt-lang TGT` reads a folder of parallel text, refuses a
bad one before anything is trained in one line that names the file (and the line), sizes the model to the corpus, trains,
and at-evaluate scores its test split."""
import gzip, json, random
import pytest
from annotated_transformer.commands.cli import train_main, evaluate_main
from annotated_transformer.engine.recipes import check_folder, load_recipe, MIN_PAIRS
from annotated_transformer.engine.tasks import SIZES

WORDS = "le chat chien voit mange une maison petit grand rouge bleu vert".split()
EN = dict(zip(WORDS, "the cat dog sees eats a house small big red blue green".split()))


def pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    "n toy French sentences and their word-for-word English."
    rng = random.Random(seed)
    fr = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]
    return fr, [" ".join(EN[w] for w in s.split()) for s in fr]


def folder(d, n_train: int = MIN_PAIRS + 200, gz: bool = False):
    "A good folder: train (plain or gzipped), val and test_a, French and English."
    d.mkdir(parents=True, exist_ok=True)
    for stem, n, seed in (("train", n_train, 0), ("val", 60, 1), ("test_a", 50, 2)):
        for lang, lines in zip(("fr", "en"), pairs(n, seed)):
            text = "".join(l + "\n" for l in lines).encode()
            if gz and stem == "train": (d / f"{stem}.{lang}.gz").write_bytes(gzip.compress(text))
            else: (d / f"{stem}.{lang}").write_bytes(text)
    return d


def test_a_good_folder_reads_every_split(tmp_path):
    splits = check_folder(folder(tmp_path / "c", gz=True), "fr", "en")
    assert sorted(splits) == ["test_a", "train", "valid"] and len(splits["train"]) == MIN_PAIRS + 200
    assert len(load_recipe("folder", "test", tmp_path / "c", src_lang="fr", tgt_lang="en")) == 50
    assert len(load_recipe("folder", "valid", tmp_path / "c", src_lang="en", tgt_lang="fr")) == 60  # either direction


def damage(d, name, data: bytes): (d / name).write_bytes(data); return d

BAD = {  # case -> (how the folder is damaged, arguments, the words of the one line)
    "line counts differ": (lambda d: damage(d, "val.en", b"the cat\n" * 59), [], "val.fr: 60 lines, but"),
    "an empty file": (lambda d: damage(d, "val.fr", b""), [], "val.fr: empty; expected one sentence per line"),
    "a missing split": (lambda d: [(d / f"val.{l}").unlink() for l in ("fr", "en")], [], "no valid.fr or val.fr or dev.fr"),
    "a split with one side": (lambda d: (d / "val.en").unlink(), [], "val.fr: has no en side"),
    "not UTF-8": (lambda d: damage(d, "train.fr", (d / "train.fr").read_bytes().replace(b"chat", b"ch\xe9t", 1)), [],
                  "train.fr, line "),
    "an empty line on one side": (lambda d: damage(d, "val.en", b"\n" + (d / "val.en").read_bytes().split(b"\n", 1)[1]), [],
                                  "val.en, line 1: empty, but line 1 of val.fr is not"),
    "too small": (lambda d: [(d / f"train.{l}").write_text("".join(x + "\n" for x in p)) for l, p in zip(("fr", "en"), pairs(50))],
                  [], "train.fr: 50 sentence pairs; at least 1000"),
    "no folder there": (lambda d: __import__("shutil").rmtree(d), [], ": not a directory; expected a folder"),
    "a language without files": (lambda d: None, ["--src-lang", "fr", "--tgt-lang", "de"], "--tgt-lang de: "),
}

@pytest.mark.parametrize("case", BAD)
def test_bad_data_is_one_line_before_training(case, tmp_path, cli):
    spoil, extra, says = BAD[case]
    d = folder(tmp_path / "c"); spoil(d)
    args = ["translate", "--data-dir", d, *(extra or ["--src-lang", "fr", "--tgt-lang", "en"]), "--run-dir", tmp_path / "run",
            "--max-steps", "2", "--no-progress"]
    r = cli(train_main, *args)
    assert r.returncode == 1 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (case, r.stderr)
    assert str(d) in r.stderr or says.startswith("--") and "(its languages: en, fr)" in r.stderr
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_the_model_is_sized_to_the_corpus():
    from annotated_transformer.engine.tasks import TASKS, sized_to
    m, s = TASKS["translate"].model, TASKS["translate"].data
    said = []
    for n, layers, width in ((29000, 3, 256), (5000, 2, 128), (4_500_000, 6, 512)):
        mc, sc = sized_to(n, m, s, log=said.append)
        assert (mc.n_layers, mc.d_model) == (layers, width) and f"{n:,} training pairs" in said[-1]
    kept, _ = sized_to(5000, type(m)(**{**m.__dict__, "d_model": 64}), s, log=None)  # an option given stays as given
    assert kept.d_model == 64 and kept.n_layers == 2
    assert [least for least, *_ in SIZES] == sorted((least for least, *_ in SIZES), reverse=True)


def test_the_multi30k_row_is_the_multi30k_task():
    "SIZES' row for a corpus of Multi30k's size is the model the multi30k task trains, field for field."
    from annotated_transformer.engine.tasks import TASKS
    (_, name, fields, vocab, _), = [row for row in SIZES if row[1] == "the Multi30k recipe"]
    assert {k: getattr(TASKS["multi30k"].model, k) for k in fields} == fields
    assert vocab == TASKS["multi30k"].data.vocab_size and TASKS["translate"].train.max_steps == TASKS["multi30k"].train.max_steps


def test_train_then_evaluate_a_folder(tmp_path, cli, monkeypatch):
    d = folder(tmp_path / "c")
    monkeypatch.chdir(tmp_path)  # --data-dir relative to here: the run records it as a full path
    r = cli(train_main, "translate", "--data-dir", d.name, "--src-lang", "fr", "--tgt-lang", "en", "--run-dir", tmp_path / "run",
            "--max-steps", "4", "--warmup-steps", "2", "--save-every", "2", "--eval-every", "2", "--d-model", "32",
            "--d-ff", "64", "--n-heads", "2", "--vocab-size", "320", "--precision", "fp32", "--device", "cpu", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert f"translate: {MIN_PAIRS + 200:,} training pairs: a smaller model (2 layers, d_model 32" in r.stdout
    monkeypatch.chdir(tmp_path / "run")  # at-evaluate from another folder finds the data where the run read it
    e = cli(evaluate_main, tmp_path / "run", "--test", "test", "--out", tmp_path / "res", "--average", "1", "--batch-size", "8",
            "--no-progress")
    assert e.returncode == 0, e.stderr
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    assert res["test_beam"]["bleu"] >= 0 and res["direction"] == "fr-en"


def test_run_task_records_the_data_as_a_full_path(tmp_path, monkeypatch):
    "A run started from Python (as the notebooks start them) records a relative --data-dir as a full path too."
    from annotated_transformer.engine.checkpoint import load_checkpoint
    from annotated_transformer.engine.launch import run_task
    from annotated_transformer.engine.tasks import task_preset
    from dataclasses import replace
    mcfg, tcfg, spec = task_preset("copy")
    mcfg = replace(mcfg, d_model=16, d_ff=32, n_heads=2, n_layers=1)
    tcfg = replace(tcfg, max_steps=1, warmup_steps=1, save_every=1, eval_every=1, run_dir=str(tmp_path / "run"),
                   device="cpu", precision="fp32", compile="off", progress=False)
    monkeypatch.chdir(tmp_path)
    given = replace(spec, data_dir="data", copy_n=64)
    assert run_task("copy", mcfg, tcfg, given) == 0
    assert load_checkpoint(tmp_path / "run").data_spec["data_dir"] == str(tmp_path / "data")
    assert given.data_dir == "data"  # the caller's spec is left as it was
