"Shipped models (issue 61): loaded by name, checked file by file; the real ones reproduce their results rows from the shipped files."
import json, random, subprocess, sys
from pathlib import Path
import pytest, torch
from annotated_transformer.engine.checkpoint import CheckpointError, load_checkpoint, make_checkpoint
from annotated_transformer.engine.shipped_models import write_shipped
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.training.data import SubwordTokenizer
from annotated_transformer.architecture.model import make_model
from annotated_transformer.engine import shipped_models as shipped

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "pretrained"

@pytest.fixture
def tiny_shipped(tmp_path, monkeypatch):
    "A directory of shipped models holding one tiny translator, `tiny-ab`, as `$AT_PRETRAINED_DIR`."
    rng = random.Random(0)
    lines = [" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))) for _ in range(200)]
    tok = SubwordTokenizer.train(lines, vocab_size=20, byte_fallback=False)
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=20))
    write_shipped(make_checkpoint(model, tokenizer=tok), tmp_path / "tiny-ab", provenance=dict(note="made by a test"))
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path))
    return tmp_path / "tiny-ab", model

def test_pretrained_loads_by_name_what_was_shipped(tiny_shipped):
    d, model = tiny_shipped
    assert shipped.shipped_names() == ["tiny-ab"] and shipped.shipped_names("at-parse") == []
    t = shipped.pretrained("tiny-ab")
    assert isinstance(t, shipped.Translator) and t.checkpoint.more["provenance"] == dict(note="made by a test")
    for (k, a), b in zip(model.state_dict().items(), t.model.state_dict().values()):
        assert torch.equal(a.bfloat16().float(), b), k  # bf16 on disk, read back exactly
    assert len(t.translate(["a b c", "d e"], beam_size=2)) == 2 and isinstance(t.translate("a b"), list)
    rec = t.attention("a b c")
    assert {"encoder", "self", "cross"} == set(rec["attention"]) and rec["source"] == "a b c"

@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:-4] + b"\0\0\0\0"), "model.safetensors: damaged"),
    (lambda d: (d / "spm.model").unlink(), "spm.model: missing"),
    (lambda d: (d / "config.json").write_text((d / "config.json").read_text().replace('"transformer"', '"gpt"')), "config.json: damaged"),
    (lambda d: (d / "MANIFEST").write_text("not a sum\n"), "MANIFEST line 1: expected '<sha256>  <file name>'"),
    (lambda d: (d / "MANIFEST").unlink(), "MANIFEST: missing"),
])
def test_a_damaged_shipped_model_is_refused_naming_the_file(tiny_shipped, damage, message):
    d, _ = tiny_shipped
    damage(d)
    with pytest.raises(CheckpointError, match=message): shipped.pretrained("tiny-ab")

def test_an_unknown_name_is_refused_listing_the_known(tiny_shipped):
    with pytest.raises(CheckpointError, match=r"'nope': no such shipped model; expected one of tiny-ab"): shipped.pretrained("nope")

def test_write_shipped_refuses_an_existing_directory(tiny_shipped):
    d, model = tiny_shipped
    with pytest.raises(FileExistsError, match="exists"): write_shipped(make_checkpoint(model), d, provenance={})

def test_at_translate_model_by_name(tiny_shipped, cli):
    from annotated_transformer.commands.cli import translate_main
    d, _ = tiny_shipped
    by_name = cli(translate_main, "--model", "tiny-ab", "--beam", "2", stdin="a b c\n")
    by_path = cli(translate_main, "--checkpoint", d, "--beam", "2", stdin="a b c\n")
    assert by_name.returncode == 0 and by_name.stdout == by_path.stdout, by_name.stderr
    r = cli(translate_main, "--model", "nope", stdin="a\n")
    assert r.returncode == 2 and "--model nope: no such shipped model; expected one of tiny-ab" in r.stderr
    r = cli(translate_main, "--model", "tiny-ab", "--checkpoint", d, stdin="a\n")
    assert r.returncode == 2 and "not allowed with" in r.stderr
    from annotated_transformer.commands.cli import parse_main
    r = cli(parse_main, "--model", "tiny-ab", stdin="a b\n")  # a translator given to the parser: says what it is and what fits
    assert r.returncode == 1 and "which at-parse does not serve; use at-translate" in r.stderr

def test_help_lists_the_shipped_models(tiny_shipped):
    from annotated_transformer.commands.cli import translate_parser
    assert "tiny-ab" in translate_parser().format_help()

@pytest.fixture
def tiny_chart(tmp_path, monkeypatch):
    "A shipped chart parser with a tagger, `tiny-chart`, trained for a few steps on made-up trees, in `$AT_PRETRAINED_DIR`."
    from annotated_transformer.parsing.chart import ChartConfig, ChartParser, ChartObjective
    from annotated_transformer.parsing.chart_vocab import ChartVocab, chart_batch
    from annotated_transformer.parsing.trees import parse_tree
    trees = [parse_tree(t) for t in ["(TOP (S (NP (DT The) (NN dog)) (VP (VBD slept)) (. .)))",
                                     "(TOP (S (NP (PRP She)) (VP (VBD saw) (NP (DT the) (NN dog))) (. .)))"]]
    v = ChartVocab.from_trees(trees, min_count=1)
    torch.manual_seed(0)
    m = ChartParser(v.sized(ChartConfig(n_layers=1, d_model=32, n_heads=4, d_ff=64, d_label=16, dropout=0.0, loss="span", tag_loss=5.0)))
    opt, obj, b = torch.optim.Adam(m.parameters(), 3e-3), ChartObjective(v, "span", 5.0), chart_batch(v, [t.words() for t in trees], trees)
    for _ in range(60): opt.zero_grad(); obj.loss(m, b).backward(); opt.step()
    write_shipped(make_checkpoint(m, tokenizer=v), tmp_path / "tiny-chart", provenance=dict(note="made by a test"))
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path))
    return tmp_path / "tiny-chart", trees

def test_a_shipped_chart_parser_parses_by_name(tiny_chart, cli):
    "pretrained() gives a ConstituencyParser whose trees name the tagger's preterminals; at-parse --model prints the same trees."
    from annotated_transformer.commands.cli import parse_main
    d, trees = tiny_chart
    assert shipped.shipped_names("at-parse") == ["tiny-chart"] and shipped.shipped_names("at-translate") == []
    p = shipped.pretrained("tiny-chart")
    assert isinstance(p, shipped.ConstituencyParser) and p.checkpoint.kind == "chart"
    got = p.parse(["The dog slept .", "She saw the dog ."])
    assert [t.words() for t in got] == [t.words() for t in trees]
    assert [t.tags() for t in got] == [t.tags() for t in trees]  # the tagger's preterminals, not XX
    r = cli(parse_main, "--model", "tiny-chart", stdin="The dog slept .\n")
    assert r.returncode == 0 and r.stdout.strip() == str(got[0]), r.stderr
    with pytest.raises(ValueError, match="holds no words"): p.parse(["The dog", "  "])

# The real shipped models: only the repository's `pretrained/` directory, never a test's.
REAL = sorted(p.name for p in SHIPPED.iterdir() if (p / "config.json").is_file()) if SHIPPED.is_dir() else []

def test_shipped_weights_fit_the_budget():
    "Every weight file the repository holds is a shipped model's, and all of them together take at most 50 MB."
    sizes = {p: p.stat().st_size for p in SHIPPED.rglob("*.safetensors")} if SHIPPED.is_dir() else {}
    assert sum(sizes.values()) <= 50e6, sizes
    tracked = subprocess.run(["git", "ls-files", "*.pt", "*.bin", "*.safetensors", "*.pth"], cwd=REPO, capture_output=True, text=True).stdout.split()
    weights = [t for t in tracked if not Path(t).name.startswith("tokenizer.")]  # a shipped tokenizer's own file (the chart parser's BPE model) is no weight
    assert all(t.startswith("pretrained/") for t in tracked) and all(t.endswith(".safetensors") for t in weights), tracked

@pytest.mark.parametrize("name", REAL)
def test_shipped_model_loads_and_translates_in_seconds(name, monkeypatch):
    monkeypatch.delenv("AT_PRETRAINED_DIR", raising=False)
    m = shipped.pretrained(name)
    assert m.checkpoint.more["provenance"]["reproduces"]["value"] > 0
    if isinstance(m, shipped.Translator): assert m.translate(["Zwei Hunde spielen im Schnee." if name.endswith("de-en") else "Two dogs play in the snow."])[0]

def _kind(name: str) -> str: return json.loads((SHIPPED / name / "config.json").read_text())["kind"]

@pytest.mark.slow  # section 22 parsed once: seconds
@pytest.mark.parametrize("name", [n for n in REAL if _kind(n) == "chart"])
def test_shipped_parser_reproduces_its_dev_f1(name, shared_data, monkeypatch):
    "Dev F1 on all of section 22 from the shipped files, within 0.1 of the row measured on the run's checkpoint when it shipped."
    from annotated_transformer.parsing.chart_choices import decoding_sums
    from annotated_transformer.parsing.evalb import bracket_prf
    from annotated_transformer.parsing.trees import ptb_trees
    if not (shared_data / "ptb").is_dir(): pytest.skip(f"the WSJ treebank is not in {shared_data}")
    monkeypatch.delenv("AT_PRETRAINED_DIR", raising=False)
    p = shipped.pretrained(name)
    row = json.loads((REPO / p.checkpoint.more["provenance"]["results"]).read_text())["row"]
    m, g, t, _ = decoding_sums([p.model], p.vocab, ptb_trees("dev", shared_data), {"cky": lambda ss: ss[0]})["cky"].tolist()
    assert abs(bracket_prf(m, g, t)["f1"] - row) <= 0.1, (bracket_prf(m, g, t)["f1"], row)

@pytest.mark.slow  # test2016 with beam 4: about 20 s per model on one core
@pytest.mark.parametrize("name", [n for n in REAL if n.startswith("multi30k")])
def test_shipped_translator_reproduces_its_results_row(name, shared_data, monkeypatch):
    "test2016 BLEU from the shipped files, scored as the results row was, within 0.1 of the row."
    from annotated_transformer.engine.recipes import load_recipe
    from annotated_transformer.translation.translation import score_corpus
    monkeypatch.delenv("AT_PRETRAINED_DIR", raising=False)
    m = shipped.pretrained(name)
    row = json.loads((REPO / "results" / name / "results.json").read_text())
    src, tgt = row["direction"].split("-")
    test = load_recipe("multi30k", "test", shared_data, src_lang=src, tgt_lang=tgt)
    r = score_corpus(m.model, m.tokenizer, test, beam_size=row["test_beam"]["beam_size"], alpha=row["test_beam"]["alpha"])
    assert abs(r["bleu"] - row["test_beam"]["bleu"]) <= 0.1, (r["bleu"], row["test_beam"]["bleu"])


def test_a_record_names_a_path_inside_the_project_from_its_top(tmp_path, monkeypatch):
    from annotated_transformer.engine.shipped_models import recorded_path, shipped_dir
    monkeypatch.delenv("AT_PRETRAINED_DIR", raising=False)
    top = shipped_dir().parent  # the project's top folder
    assert recorded_path(top / "pretrained" / "multi30k-de-en") == "pretrained/multi30k-de-en"  # the same on every clone
    assert recorded_path(tmp_path / "m") == str(tmp_path / "m")  # outside the project: as given
