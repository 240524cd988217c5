"""The shipped chart parser exported for the page (nbs/38b_onnx_parser.ipynb): onnxruntime in Python gives PyTorch's chart
and tag scores and its trees; the page's own path (docs_src/_static/live/parser.js with onnxruntime-web, run under node by
tests/js/parser_check.mjs) gives the Python parser's trees, on a few sentences and (slow) on all of WSJ section 22."""
import json, shutil, subprocess
from pathlib import Path
import numpy as np
import pytest, torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from annotated_transformer.parsing.chart import chart_parse
from annotated_transformer.parsing.evalb import evalb, with_tags
from annotated_transformer.bench.onnx_parser import export_parser, onnx_parse, parser_inputs
from annotated_transformer.engine.shipped_models import pretrained, shipped_names
from annotated_transformer.parsing.trees import parse_tree, ptb_trees

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-3
# sentences written for this test, in the treebank's tokenization
SENTENCES = [s.split() for s in """The parser runs in the page , with no server .
Hi !
Shares of the company , which makes `` smart '' phones , rose 5 % to $ 12.50 -LRB- about 1\\/2 point -RRB- on Friday .
Mr. O'Brien said he would n't sell the 1,200-acre farm to Acme Corp. unless the price doubled .
Did the committee approve the plan , or did it ask for more time ?
Zürich 's naïve 北京 😀 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx""".splitlines()]
# the same kind of text as a reader types it, for the page's tokenizer
TEXTS = ["The company didn't say how much it paid for the two small banks.",
         '"We cannot wait," she said (twice) on Friday.']


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    "The shipped parser exported once for this module: out/ptb-chart/{parser.onnx, spm.model, meta.json}."
    if "ptb-chart" not in shipped_names("at-parse"): pytest.skip("no shipped ptb-chart in pretrained/")
    return export_parser("ptb-chart", tmp_path_factory.mktemp("live"))


@pytest.fixture(scope="module")
def parser():
    return pretrained("ptb-chart")


@pytest.fixture(scope="module")
def session(exported):
    opts = ort.SessionOptions(); opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(exported / "parser.onnx"), opts)


def test_onnxruntime_gives_pytorchs_scores_and_trees(session, parser):
    for words in SENTENCES:
        x = parser_inputs(parser.vocab, words)
        t = torch.from_numpy(x)
        with torch.no_grad(): want, want_tags = parser.model(t[None, :, 0], t[None], torch.tensor([len(words)]), tags=True)
        chart, tags = session.run(None, {"pieces": x})
        assert chart.shape == (len(words) + 1,) * 2 + (len(parser.vocab.labels),) and tags.shape == (len(words), len(parser.vocab.tags))
        np.testing.assert_allclose(chart, want[0].numpy(), atol=TOL, rtol=0, err_msg=" ".join(words))
        np.testing.assert_allclose(tags, want_tags[0].numpy(), atol=TOL, rtol=0, err_msg=" ".join(words))
        assert str(onnx_parse(session, parser.vocab, words)) == str(chart_parse(parser.model, parser.vocab, [words])[0])


def test_meta_describes_the_files(exported, parser):
    import hashlib
    meta = json.loads((exported / "meta.json").read_text())
    assert sorted(p.name for p in exported.iterdir()) == ["meta.json", "parser.onnx", "spm.model"]
    for f in meta["files"].values():
        b = (exported / f["name"]).read_bytes()
        assert (len(b), hashlib.sha256(b).hexdigest()) == (f["bytes"], f["sha256"])
    assert meta["labels"] == parser.vocab.labels and meta["tags"] == parser.vocab.tags and meta["labels"][0] == "∅"
    assert meta["pieces"] == dict(pad_id=0, bos_id=1, eos_id=2, max_pieces=20) and meta["max_words"] == parser.model.cfg.max_len - 2
    g = onnx.load(exported / "parser.onnx").graph
    assert [i.name for i in g.input] == ["pieces"] and [o.name for o in g.output] == ["chart", "tags"]
    sizes = {t.name: (t.data_type, int(np.prod(t.dims))) for t in g.initializer}
    fp16 = sum(n for d, n in sizes.values() if d == onnx.TensorProto.FLOAT16)
    fp32 = {k: n for k, (d, n) in sizes.items() if d == onnx.TensorProto.FLOAT}
    assert fp16 == meta["fp16_rounding"]["values"] == sum(p.numel() for p in parser.model.parameters())  # every weight in fp16
    assert {k for k, n in fp32.items() if n > 1} == {"model.pos.pe"}  # the positional table, and the graph's scalars


def _node_parse(model_dir: Path, items: list, tmp: Path) -> subprocess.Popen:
    "Start tests/js/parser_check.mjs on `items` (sentences or word lists); skips without node or onnxruntime-web."
    node = shutil.which("node")
    if node is None: pytest.skip("node is not installed")
    if not (REPO / "node_modules" / "onnxruntime-web").is_dir(): pytest.skip("node_modules/onnxruntime-web is missing: run `npm ci`")
    f = tmp / "sentences.jsonl"
    f.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in items), encoding="utf-8")
    return subprocess.Popen([node, str(REPO / "tests" / "js" / "parser_check.mjs"), str(model_dir), str(f)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")


def _results(proc: subprocess.Popen) -> tuple[list[dict], str]:
    out, err = proc.communicate(timeout=3600)
    assert proc.returncode == 0, err[-2000:]
    return [json.loads(l) for l in out.splitlines()], err


def test_the_pages_path_gives_the_python_parsers_trees(exported, parser, tmp_path):
    got, _ = _results(_node_parse(exported, SENTENCES + TEXTS, tmp_path))
    assert [r["words"] for r in got[:len(SENTENCES)]] == SENTENCES  # words are taken as they are
    assert got[len(SENTENCES)]["words"] == "The company did n't say how much it paid for the two small banks .".split()
    assert got[-1]["words"] == "`` We can not wait , '' she said -LRB- twice -RRB- on Friday .".split()
    want = chart_parse(parser.model, parser.vocab, [r["words"] for r in got])
    assert [r["bracketed"] for r in got] == [str(t) for t in want]
    assert [r["tags"] for r in got] == [t.tags() for t in want]


@pytest.mark.slow
def test_the_pages_path_on_section_22(exported, parser, shared_data, tmp_path):
    golds = ptb_trees("dev", shared_data)
    words = [g.words() for g in golds]
    proc = _node_parse(exported, words, tmp_path)  # node parses while Python does
    py = chart_parse(parser.model, parser.vocab, words)
    got, err = _results(proc)
    page = [parse_tree(r["bracketed"]) for r in got]
    same = sum(str(a) == str(b) for a, b in zip(py, page))
    f1 = {k: evalb(golds, [with_tags(t, g) for t, g in zip(trees, golds)])["all"] for k, trees in (("python", py), ("page", page))}
    print(f"WSJ section 22, {len(golds)} sentences: the page's tree is the Python parser's for {same} ({100 * same / len(golds):.2f}%); "
          f"F1 {f1['python']['f1']:.2f} (Python), {f1['page']['f1']:.2f} (page); node: {err.strip().splitlines()[-1]}")
    assert len(page) == len(golds) == 1700 and f1["page"]["errors"] == 0
    assert same >= 0.99 * len(golds)
    assert abs(f1["page"]["f1"] - f1["python"]["f1"]) <= 0.1
