"""A pretrained/ folder that no damaged file can break (issue 72, item 5): a damaged model never breaks `--help` or another
model; asked for by name it is refused in one line naming the file (and the line and column of bad JSON), with exit 1 from the
commands and a `CheckpointError` (a `ValueError`) from the Python API. The Python API takes text only, checked before anything runs.

Each test builds its models in `tmp_path` (`$AT_PRETRAINED_DIR`): `tiny-ab`, an intact tiny translator, beside a damaged copy.
Damage that the MANIFEST would catch as a changed sum is made behind its back (`resum`), so that each reader's own check is seen."""
import json, random, shutil
from pathlib import Path
import pytest, torch
from annotated_transformer.engine.checkpoint import CheckpointError, make_checkpoint, save_model
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.training.data import SubwordTokenizer, sha256_file
from annotated_transformer.architecture.model import make_model
from annotated_transformer.engine import shipped_models as shipped
from annotated_transformer.engine.shipped_models import write_shipped

@pytest.fixture(scope="module")
def template(tmp_path_factory):
    "An intact tiny translator, written once, copied by each test."
    rng = random.Random(0)
    tok = SubwordTokenizer.train([" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))) for _ in range(200)],
                                 vocab_size=20, byte_fallback=False)
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=20))
    return write_shipped(make_checkpoint(model, tokenizer=tok), tmp_path_factory.mktemp("t") / "tiny-ab", provenance=dict(note="a test"))

@pytest.fixture
def models(template, tmp_path, monkeypatch):
    "`$AT_PRETRAINED_DIR` holding `tiny-ab` (intact) and `bad-model` (a copy to damage); returns the directory of `bad-model`."
    for name in ("tiny-ab", "bad-model"): shutil.copytree(template, tmp_path / name)
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path))
    return tmp_path / "bad-model"

def resum(d: Path):
    "Rewrite a model's MANIFEST to match its files: damage the sums cannot see."
    (d / "MANIFEST").write_text("".join(f"{sha256_file(p)}  {p.name}\n" for p in sorted(d.iterdir()) if p.name != "MANIFEST"))

def edit_config(d: Path, **model_config):
    c = json.loads((d / "config.json").read_text()); c["model_config"] |= model_config
    (d / "config.json").write_text(json.dumps(c)); resum(d)

def one_line(r, prog: str, *words: str):
    "Exit 1 and one line on stderr, `PROG: error: ...`, holding each of `words`."
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), r.stderr
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]

def others_work(cli, template, skipped: bool = False):
    """`--help` of both commands, the intact model by name and a checkpoint given by path all still work; `skipped`: the damaged
    model is left out of the lists in --help (its config.json cannot say what it is; other damage shows only when it is loaded)."""
    from annotated_transformer.commands.cli import translate_main, translate_parser, parse_main, parse_parser
    for main in (translate_main, parse_main):
        r = cli(main, "--help")
        assert r.returncode == 0 and "--model MODEL" in r.stdout, r.stderr
    listed = {make: next(a.help for a in make()._actions if "--model" in a.option_strings) for make in (translate_parser, parse_parser)}
    assert "tiny-ab" in listed[translate_parser] and any("bad-model" in h for h in listed.values()) != skipped, listed
    for args in (["--model", "tiny-ab"], ["--checkpoint", template]):
        r = cli(translate_main, *args, "--beam", "1", stdin="a b c\n")
        assert r.returncode == 0 and r.stdout.strip(), r.stderr

def refused(cli, d: Path, *words: str) -> str:
    "`bad-model` asked for by name: one line naming the file from the command, the same `CheckpointError` from the Python API."
    from annotated_transformer.commands.cli import translate_main
    line = one_line(cli(translate_main, "--model", d.name, stdin="a b\n"), "at-translate", *words)
    with pytest.raises(CheckpointError) as e: shipped.pretrained(d.name)
    assert str(e.value) in line, (str(e.value), line)
    return line

# probe 1: a broken folder breaks neither --help nor another model
@pytest.mark.parametrize("damage, words", [
    (lambda d: (d / "config.json").write_text(""), ["config.json: damaged: its sha256 differs"]),  # emptied: the MANIFEST sees it
    (lambda d: ((d / "config.json").write_bytes(b"\xff\xfe{"), resum(d)), ["config.json: invalid UTF-8 at byte 0"]),
    (lambda d: ((d / "config.json").write_text('{"kind": "gpt"}'), resum(d)), ["config.json: format None; expected an object of format"]),
])
def test_a_broken_folder_breaks_neither_help_nor_another_model(models, template, cli, damage, words):
    "Skipped from the commands' lists (their --help), listed by name, refused only when asked for."
    damage(models)
    others_work(cli, template, skipped=True)
    assert shipped.shipped_names() == ["bad-model", "tiny-ab"] and shipped.shipped_names("at-translate") == ["tiny-ab"]
    refused(cli, models, *words)

# probe 2: the MANIFEST is hashed in chunks, and names only files inside the folder
def test_the_manifest_check_never_reads_a_file_whole(models, template, cli, monkeypatch):
    "A weight file larger than memory (a 64 GiB sparse file gave MemoryError) is hashed 1 MiB at a time."
    read_bytes = Path.read_bytes
    def whole(p):
        if p.name == "model.safetensors": raise MemoryError("read whole")
        return read_bytes(p)
    monkeypatch.setattr(Path, "read_bytes", whole)
    assert isinstance(shipped.pretrained("bad-model"), shipped.Translator)
    with open(models / "model.safetensors", "r+b") as f: f.truncate(3 << 20)  # grown, sparse: refused by its sum, not by memory
    refused(cli, models, "bad-model/model.safetensors: damaged: its sha256 differs from the one in")

@pytest.mark.parametrize("name", ["../outside.txt", "{tmp}/outside.txt"])
def test_a_manifest_naming_a_file_outside_the_folder_is_refused(models, template, cli, name):
    outside = models.parent / "outside.txt"; outside.write_text("not the model's\n")
    name = name.format(tmp=models.parent)
    with open(models / "MANIFEST", "a") as f: f.write(f"{sha256_file(outside)}  {name}\n")
    others_work(cli, template)
    refused(cli, models, "bad-model/MANIFEST line 4:", f"{name!r} is outside")

# probe 3: the config's sizes against the stored weights, before anything is built
def test_a_config_deeper_than_its_weights_is_refused_before_building(models, template, cli):
    edit_config(models, n_layers=1000)  # the old code built 1000 layers first
    others_work(cli, template)
    refused(cli, models, "bad-model/config.json: the model it describes does not fit", "bad-model/model.safetensors",
            "(n_layers=1000, but the weights are 87 tensors, fewer than one per layer)")

def test_a_config_of_other_sizes_names_the_first_weight_that_differs(models, template, cli):
    edit_config(models, d_ff=48)
    refused(cli, models, "bad-model/config.json: the model it describes does not fit",
            "(encoder.layers.0.ff.linear1.weight is [128, 64] in the weights, [48, 64] in the model)")

# probe 4: each damaged file is one clear line naming it
@pytest.mark.parametrize("damage, words, skipped", [  # skipped: out of the lists (a config.json that cannot say what it is)
    (lambda d: (d / "config.json").write_text('{"format": "annotated_transformer/shipped-1",\n "kind": }'),
     ["bad-model/config.json: not JSON: Expecting value at line 2, column 10"], True),
    (lambda d: (d / "config.json").write_text("[1, 2]"), ["bad-model/config.json: a JSON list ([1, 2]); expected an object"], True),
    (lambda d: (d / "config.json").write_text(json.dumps({**json.loads((d / "config.json").read_text()), "model_config": [3]})),
     ["bad-model/config.json: model_config: [3]; expected an object"], False),
    (lambda d: (d / "spm.model").write_bytes(b"not a sentencepiece model" * 4),
     ["bad-model/spm.model: its tokenizer cannot be read from it"], False),
    (lambda d: (d / "model.safetensors").write_bytes(b"\xff" * 64),
     ["bad-model/model.safetensors: not a readable safetensors file"], False),
    (lambda d: (d / "spm.model").unlink(),  # and MANIFEST re-summed without it: the message named no file at all
     ["bad-model/config.json: its tokenizer names the file 'spm.model'", "bad-model/MANIFEST does not list"], False),
    (lambda d: (d / "config.json").write_text(json.dumps({**json.loads((d / "config.json").read_text()), "dtype": "float17"})),
     ["bad-model/config.json: dtype 'float17', but", "bad-model/model.safetensors stores bfloat16"], False),  # was taken
    (lambda d: (d / "config.json").write_text(json.dumps({**json.loads((d / "config.json").read_text()), "dtype": 16})),
     ["bad-model/config.json: dtype: 16; expected a string"], False),
])
def test_each_damaged_file_is_one_line_naming_it(models, template, cli, damage, words, skipped):
    damage(models); resum(models)
    others_work(cli, template, skipped)
    line = refused(cli, models, *words)
    assert "INTERNAL" not in line and "has no attribute" not in line and "(ValueError" not in line, line

# probe 7: a model on token ids is served by no command, whichever is asked
def test_at_parse_on_a_copy_task_checkpoint_says_no_command_serves_it(tmp_path, cli):
    from annotated_transformer.commands.cli import parse_main, translate_main
    ck = save_model(make_model(TransformerConfig.tiny()), tmp_path / "copy.pt")  # no tokenizer: token ids in and out
    line = one_line(cli(parse_main, "--checkpoint", ck, stdin="a b\n"), "at-parse", f"{ck}: holds a transformer model (token ids)",
                    "which at-parse does not serve; no command reads text for it: it holds no tokenizer", "greedy_decode")
    assert "use at-translate" not in line, line  # which would refuse it too:
    one_line(cli(translate_main, "--checkpoint", ck, stdin="a b\n"), "at-translate", f"{ck}: no tokenizer inside the checkpoint")

# probe 8: the Python API takes text, checked before anything runs
@pytest.mark.parametrize("lines, error, words", [
    (b"a b c", TypeError, "lines: bytes; expected str or a list of str"),
    (["a b", 3], TypeError, "lines[1]: int; expected str"),
    (["a b", "c \ud800 d"], ValueError, "lines[1], character 2: a lone surrogate ('\\ud800')"),
])
def test_translate_takes_text_only(models, lines, error, words):
    t = shipped.pretrained("tiny-ab")
    with pytest.raises(error) as e: t.translate(lines)
    assert words in str(e.value), str(e.value)
    with pytest.raises((TypeError, ValueError), match="lines|sentence"): t.attention(lines if isinstance(lines, bytes) else lines[1])

def test_the_parser_takes_text_only(tmp_path, monkeypatch):
    from annotated_transformer.parsing.chart import ChartConfig, ChartParser
    from annotated_transformer.parsing.chart_vocab import ChartVocab
    from annotated_transformer.parsing.trees import parse_tree
    v = ChartVocab.from_trees([parse_tree("(TOP (S (NP (DT The) (NN dog)) (VP (VBD slept)) (. .)))")], min_count=1)
    torch.manual_seed(0)
    m = ChartParser(v.sized(ChartConfig(n_layers=1, d_model=32, n_heads=4, d_ff=64, d_label=16)))
    write_shipped(make_checkpoint(m, tokenizer=v), tmp_path / "tiny-chart", provenance={})
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path))
    p = shipped.pretrained("tiny-chart")
    assert p.parse("The dog slept .")[0].words() == ["The", "dog", "slept", "."]
    with pytest.raises(TypeError, match=r"lines: bytes"): p.parse(b"The dog slept .")
    with pytest.raises(ValueError, match=r"lines\[0\], character 4: a lone surrogate"): p.parse("The \udc80 slept .")
