"`at-train multi30k` then `at-evaluate` as a user runs them (their entry functions, in-process), in both directions, on a tiny corpus in the Multi30k layout."
import json
import pytest
from conftest import write_tiny_multi30k, assert_closing_lines
from annotated_transformer.engine.checkpoint import Checkpoint, load_checkpoint
from annotated_transformer.commands.cli import train_main, evaluate_main
from annotated_transformer.translation.translation import paper_bleu, paper_tokenize

@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    "Word-for-word German/English pairs in the Multi30k layout (conftest.write_tiny_multi30k), 20 validation and test lines."
    return write_tiny_multi30k(tmp_path_factory.mktemp("data"), 20)

@pytest.mark.parametrize("src,tgt", [("de", "en"), ("en", "de")])
def test_train_then_evaluate(tmp_path, data_dir, src, tgt, cli, monkeypatch):
    r = cli(train_main, "multi30k", "--src_lang", src, "--tgt_lang", tgt, "--data_dir", str(data_dir),
            "--no-download", "--vocab_size", "320", "--d_model", "32", "--d_ff", "64", "--n_heads", "2", "--n_layers", "1",
            "--max_steps", "6", "--warmup_steps", "2", "--save_every", "2", "--eval_every", "3", "--max_tokens", "400",
            "--precision", "fp32", "--device", "cpu", "--no-progress", "--run_dir", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    assert_closing_lines(r.stdout)  # at-train's closing lines, the same for every task
    ck = load_checkpoint(tmp_path / "run")
    assert (ck.data_spec["src_lang"], ck.data_spec["tgt_lang"]) == (src, tgt)
    built, build = [], Checkpoint.build  # which checkpoints at-evaluate turns into models
    monkeypatch.setattr(Checkpoint, "build", lambda self, *a, **k: built.append(self) or build(self, *a, **k))
    r = cli(evaluate_main, str(tmp_path / "run"), "--test", "test", "--out",
            str(tmp_path / "res"), "--average", "2", "3", "--batch-size", "8", "--save-chosen", str(tmp_path / "chosen.pt"))
    assert r.returncode == 0, r.stderr
    # progress while it decodes: a bar per candidate on validation, then beam and greedy on test ...
    for bar in ("val: last (3 candidates), beam 1", "val: avg2", "val: avg3", "test: ", ", beam 4", ", beam 1"): assert bar in r.stderr, bar
    assert "20/20" in r.stderr
    # ... and a summary in words
    out = r.stdout.splitlines()
    assert out[0].startswith("chosen: ") and "the best validation BLEU on multi30k val (20 sentences, beam 1): last " in out[0]
    assert out[1].startswith("test multi30k test (20 sentences): BLEU ") and "with beam 4" in out[1] and "greedy; chrF" in out[1]
    assert out[-1].startswith("wrote results.json, test.beam.txt, test.greedy.txt and metrics.jsonl to ")
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    assert res["direction"] == f"{src}-{tgt}" and res["n_test"] == 20 and res["n_valid"] == 20
    assert sorted(res["selection"]) == ["avg2", "avg3", "last"]
    assert res["chosen"] == max(res["selection"], key=lambda n: res["selection"][n]["valid_bleu"])  # the first best on a tie
    assert len(built) == 3 and len({id(c) for c in built}) == 3  # each candidate built once; the chosen one is not built again
    assert f"--src_lang {src}" in res["command"] or src == "de"  # the command reproduces the direction
    refs = (data_dir / "multi30k" / f"test_2016_flickr.{tgt}").read_text(encoding="utf-8").splitlines()
    hyps = (tmp_path / "res" / "test.beam.txt").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(refs)
    assert res["test_beam"]["bleu_paper"] == pytest.approx(paper_bleu(hyps, refs, tgt)["bleu_paper"])
    assert load_checkpoint(tmp_path / "chosen.pt").model_config == ck.model_config

def test_evaluate_errors(tmp_path, cli):
    r = cli(evaluate_main, str(tmp_path / "nothing"), "--test", "test", "--out", str(tmp_path))
    assert r.returncode == 1 and "not a run directory" in r.stderr
    r = cli(evaluate_main, str(tmp_path))
    assert r.returncode == 2 and "--test" in r.stderr

def test_paper_tokenization():
    assert paper_tokenize("Das Hotel-Zimmer (2-3 Nächte).", "de") == "Das Hotel ##AT##-##AT## Zimmer ( 2 ##AT##-##AT## 3 Nächte ) ."
    assert paper_tokenize("a-b-c", "de") == "a ##AT##-##AT## b-c"  # like perl's s///g: matches do not overlap
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"): paper_bleu(["a", "b"], ["a"])

def test_evaluate_ships_the_chosen_model(tmp_path, data_dir, cli, monkeypatch):
    "`at-evaluate --ship NAME`: the checkpoint it chose ships, in the smallest precision that reproduces its test BLEU, loadable by name."
    from annotated_transformer.engine import checkpoint
    from annotated_transformer import pretrained
    from annotated_transformer.commands.cli import translate_main
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path / "shipped"))
    # the launcher decides the kind once: a save that asked the registry again would fail here
    monkeypatch.setattr(checkpoint, "kind_of", lambda *a, **k: pytest.fail("make_checkpoint decided the kind again"))
    r = cli(train_main, "multi30k", "--data_dir", str(data_dir), "--no-download", "--vocab_size", "320", "--d_model", "32",
            "--d_ff", "64", "--n_heads", "2", "--n_layers", "1", "--max_steps", "4", "--warmup_steps", "2", "--save_every", "2",
            "--max_tokens", "400", "--precision", "fp32", "--device", "cpu", "--no-progress", "--run_dir", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    monkeypatch.undo(); monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path / "shipped"))
    from annotated_transformer.engine import shipped_models  # tmp_path stands for the project's top folder here
    monkeypatch.setattr(shipped_models, "project_root", lambda: tmp_path.resolve())
    args = [str(tmp_path / "run"), "--test", "test", "--out", str(tmp_path / "res"), "--average", "2", "--batch-size", "8", "--no-progress"]
    r = cli(evaluate_main, *args, "--ship", "tiny-de-en")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "res" / "shipped.json").read_text())
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    assert rec["row"] == res["test_beam"]["bleu"] and sorted(rec["scores"]) == ["bfloat16", "float16", "float32"]
    assert abs(rec["scores"][rec["stored"]]["bleu"] - rec["row"]) <= 0.05 and "shipped tiny-de-en: " in r.stderr
    assert rec["shipped"] == "shipped/tiny-de-en"  # from the top of the project: the same on every clone
    ck = load_checkpoint(tmp_path / "shipped" / "tiny-de-en")
    assert ck.more["provenance"]["chosen"] == res["chosen"] and ck.more["provenance"]["steps"] == res["steps"]
    r = cli(translate_main, "--model", "tiny-de-en", "--beam", "2", stdin="a b c\n")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r.stderr
    assert type(pretrained("tiny-de-en")).__name__ == "Translator"
    # a name taken, or one that is no plain name: refused before any decoding, nothing written
    for name, says in (("tiny-de-en", "exists; remove it or choose another name"), ("../up", "expected a plain name")):
        r = cli(evaluate_main, *args[:4], str(tmp_path / "res2"), *args[5:], "--ship", name)
        assert r.returncode == 2 and says in r.stderr and not (tmp_path / "res2").exists(), r.stderr
