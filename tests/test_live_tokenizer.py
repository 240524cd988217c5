"""The in-page tokenizer, docs_src/_static/live/spm.js, against Python's sentencepiece: the same ids, pieces and decoded text.

node runs tests/js/spm_check.mjs over a file of sentences; every shipped sentencepiece model is checked (the translators'
spm.model and the chart parser's subword model), on the fixture's edge cases and Multi30k (500 validation sentences per language
here, every sentence of every split and language with --slow), and so are small models trained here with the normalizers and
options the shipped ones do not use (NFKC through the precompiled charsmap, user-defined symbols, unused pieces, ...).
"""
from __future__ import annotations
import functools, gzip, hashlib, http.server, io, json, random, shutil, subprocess, threading
from pathlib import Path
import pytest
import sentencepiece as spm

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "tests/js/spm_check.mjs"
FIXTURE = json.loads((REPO / "tests/fixtures/spm_ids.json").read_text(encoding="utf-8"))
EDGE = [c["text"] for c in FIXTURE["encode"]] + [
    "  Ｈａｌｌｏ　Welt ﬁnal ＡＢＣ①②③ ㍻ ﷺ ", "Straße\u00a0Café\tTab ẞ", "<sep>Hund<sep> Hundehütte <ctl>", "ǆ ǅ Ǆ İ ß Σ ς",
    "AAA aaa Ein Mann ss ß", "ｶﾀｶﾅ ㌔ ㍉ ﬀ", "  ", "\u3000\u3000", "x\u00a0\u00a0y"]

def shipped_models() -> list[tuple[str, bytes]]:
    "(name, bytes) of each distinct sentencepiece model under pretrained/ (a file identical to an earlier one is checked once)."
    files = sorted(REPO.glob("pretrained/*/spm.model")) + sorted(REPO.glob("pretrained/*/*.model_proto.bin"))
    seen, out = {}, []
    for f in files:
        b, name = f.read_bytes(), str(f.relative_to(REPO))
        h = hashlib.sha256(b).hexdigest()
        if h in seen: print(f"{name} is byte-identical to {seen[h]}: checked once"); continue
        seen[h] = name; out.append((name, b))
    return out

MODELS = shipped_models()

@pytest.fixture(scope="module")
def node():
    exe = shutil.which("node")
    if exe is None: pytest.skip("node not found (the in-page tokenizer's tests need node 20 or later)")
    return exe

def run_js(node: str, model: bytes, lines: list, tmp_path: Path, decode: bool = False) -> list:
    "spm_check.mjs's answer for each line: {ids, pieces, text} per sentence, or the text of each id list with decode=True."
    (tmp_path / "m.model").write_bytes(model)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    r = subprocess.run([node, str(CHECK), str(tmp_path / "m.model"), str(tmp_path / "in.jsonl"), *(["--decode"] if decode else [])],
                       capture_output=True, text=True, encoding="utf-8")
    assert r.returncode == 0, r.stderr[-3000:]
    print(r.stderr.strip())
    out = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(out) == len(lines)
    return out

def check_same(node: str, name: str, model: bytes, sentences: list[str], tmp_path: Path) -> int:
    "Asserts that spm.js gives Python's ids, pieces and decode(encode(s)) for every sentence; returns how many were checked."
    sp = spm.SentencePieceProcessor(model_proto=model)
    ids, pieces = sp.encode(sentences), sp.encode(sentences, out_type=str)
    texts = sp.decode(ids)
    js = run_js(node, model, sentences, tmp_path)
    bad = [(s, i, p, t, j) for s, i, p, t, j in zip(sentences, ids, pieces, texts, js)
           if (j["ids"], j["pieces"], j["text"]) != (i, p, t)]
    assert not bad, f"{name}: {len(bad)} of {len(sentences)} sentences differ, e.g.\n" + "\n".join(
        f"{s!r}\n  python {i} {p} {t!r}\n  js     {j['ids']} {j['pieces']} {j['text']!r}" for s, i, p, t, j in bad[:5])
    print(f"{name}: {len(sentences)} sentences, ids, pieces and decoded text identical to Python's sentencepiece {spm.__version__}")
    return len(sentences)

def multi30k(shared_data: Path, pattern: str, n: int | None = None) -> list[str]:
    files = sorted((shared_data / "multi30k").glob(pattern))
    if not files: pytest.skip(f"no Multi30k files {pattern} under {shared_data / 'multi30k'}")
    out = []
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8") as fh: out += fh.read().splitlines()[:n]
    return out

def test_models_found():
    "The translators' and the chart parser's models are there (else the tests below would check nothing)."
    assert MODELS and any("multi30k-de-en" in n for n, _ in MODELS) and any("ptb-chart" in n for n, _ in MODELS), [n for n, _ in MODELS]

@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_edge_cases(node, name, model, tmp_path):
    check_same(node, name, model, EDGE, tmp_path)

@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_first_500_val_sentences(node, shared_data, name, model, tmp_path):
    check_same(node, name, model, multi30k(shared_data, "val.*.gz", 500), tmp_path)

@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_decode_random_ids(node, name, model, tmp_path):
    "decode of seeded random id lists (byte pieces often: partial and invalid UTF-8, control and unknown ids) as sp.decode's."
    sp, rng = spm.SentencePieceProcessor(model_proto=model), random.Random(0)
    V, ws = sp.vocab_size(), sp.piece_to_id("\u2581")
    lists = [[rng.choice([rng.randrange(V), rng.randrange(4, 260), rng.randrange(4), ws]) for _ in range(rng.randint(0, 12))]
             for _ in range(2000)]
    assert run_js(node, model, lists, tmp_path, decode=True) == [sp.decode(x) for x in lists]

@pytest.mark.slow
@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_all_multi30k_sentences(node, shared_data, name, model, tmp_path):
    "Every sentence of every Multi30k split and language under the shared data (train, val, test2016; de, en and any others)."
    sentences = multi30k(shared_data, "*.gz")
    assert len(sentences) >= 2 * (29000 + 1014 + 1000)
    check_same(node, name, model, sentences, tmp_path)

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass

def test_runs_in_chromium(chromium):
    "The module loads in a browser (ES module import, fetch of the model) and gives there the fixture's ids and text."
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(REPO)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    page = chromium.new_page()
    try:
        page.goto(f"http://127.0.0.1:{srv.server_address[1]}/tests/fixtures/spm_ids.json")
        got = page.evaluate("""async ([model, texts]) => {
            const {loadSentencePiece} = await import("/docs_src/_static/live/spm.js");
            const sp = await loadSentencePiece("/" + model);
            return texts.map(t => [sp.encode(t), sp.decode(sp.encode(t))]);
        }""", [FIXTURE["model"], [c["text"] for c in FIXTURE["encode"]]])
    finally:
        page.close(); srv.shutdown(); srv.server_close()
    assert got == [[c["ids"], c["decoded"]] for c in FIXTURE["encode"]]

def trained(texts: list[str], tmp_path: Path, **options) -> bytes:
    "A small BPE model trained here (deterministic), as `SubwordTokenizer.train` does but with other normalizer options."
    rules = {k: tmp_path / f"{k}.tsv" for k in ("normalization_rule_tsv", "denormalization_rule_tsv") if k in options}
    for k, f in rules.items(): f.write_text(options[k]); options[k] = str(f)
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=m, model_type="bpe", vocab_size=600,
                                   num_threads=1, minloglevel=2, **{"byte_fallback": True, **options})
    return m.getvalue()

VARIANTS = {  # name -> trainer options
    "nmt_nfkc": dict(normalization_rule_name="nmt_nfkc"),
    "nfkc_cf, user-defined and control symbols, whitespace as suffix": dict(
        normalization_rule_name="nfkc_cf", treat_whitespace_as_suffix=True, user_defined_symbols=["<sep>", "Hund"],
        control_symbols=["<ctl>"]),
    "nmt_nfkc, no byte fallback (unknown runs), spaces kept, no dummy prefix": dict(
        normalization_rule_name="nmt_nfkc", byte_fallback=False, character_coverage=0.98, remove_extra_whitespaces=False,
        add_dummy_prefix=False),
    # E and Ein: the longest rule wins
    "custom rules (A->a, E->e, Ein->1, ss<->ß, two spaces->one) and a denormalizer (a->AA, ß->SS)": dict(
        normalization_rule_tsv="41\t61\n45\t65\n45 69 6E\t31\n73 73\tDF\nDF\t73 73\n20 20\t20\n",
        denormalization_rule_tsv="61\t41 41\nDF\t53 53\n"),
    "identity with unused pieces": dict(normalization_rule_name="identity", remove_extra_whitespaces=False),
}

@pytest.mark.parametrize("variant", VARIANTS)
def test_other_normalizers_and_options(node, shared_data, variant, tmp_path):
    "Models trained on 1500 Multi30k training sentences per language with the options above: the charsmap, user-defined and unused pieces are exercised."
    model = trained(multi30k(shared_data, "train.*.gz", 1500), tmp_path, **VARIANTS[variant])
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto.FromString(model)
    if "unused" in variant:  # pieces marked unused are merged, then split back into the pieces they were made of (bpe_model.cc)
        for p in [p for p in proto.pieces if p.type == p.NORMAL and len(p.piece) >= 3][:40]: p.type = p.UNUSED
        model = proto.SerializeToString()
    elif "identity" not in variant:
        assert proto.normalizer_spec.precompiled_charsmap  # the case this test is about
    check_same(node, variant, model, EDGE + multi30k(shared_data, "val.*.gz", 250), tmp_path)
