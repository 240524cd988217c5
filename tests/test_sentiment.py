"Attention-pooling sentiment classifiers (22_attention_classifier): bad input, download checksum, split, pooling, padding invariance."
import hashlib, json, zipfile
from collections import Counter
import pytest
import torch
from annotated_transformer.before.sentiment_data import DOMAINS, SPECIALS, Vocab, download_sentiment, load_sentiment, make_batch, read_sentiment_file, split_sentiment, tokenize
from annotated_transformer.before.attention_classifier import AttentionPooling, LSTMClassifier, TransformerClassifier, make_classifier, run_experiment


# ---------------------------------------------------------------- reading files
@pytest.mark.parametrize("content, msg", [
    (b"", "the file is empty"),
    (b"\n\n", "the file is empty"),
    (b"Great phone.\t1\nno tab on this line 0\n", "line 2: no tab"),
    (b"Great phone.\t1\n\nAwful.\t0\n", "line 2: no tab"),  # a blank line in the middle
    (b"Great phone.\t1\nAwful.\t2\n", "line 2: label '2' is not 0 or 1"),
    (b"Great phone.\tpositive\n", "line 1: label 'positive' is not 0 or 1"),
    (b"Great phone.\t1\n\t0\n", "line 2: empty sentence"),
    ("Great phone.\t1\nok\t1\nCaf\xe9 bien.\t1\n".encode("latin-1"), "line 3: invalid UTF-8"),
])
def test_bad_input_names_file_and_line(tmp_path, content, msg):
    p = tmp_path / "bad_labelled.txt"
    p.write_bytes(content)
    with pytest.raises(ValueError) as e: read_sentiment_file(p)
    assert msg in str(e.value) and str(p) in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="download_sentiment"): read_sentiment_file(tmp_path / "nope.txt")


def test_irregular_but_valid_lines(tmp_path):
    "CRLF, trailing spaces before the tab (IMDb), a tab inside the sentence, U+0085 (a line break for str.splitlines)."
    p = tmp_path / "ok.txt"
    p.write_bytes(b"Fine.  \t1\r\nBad \xc2\x85 really.\t0\nA\ttab inside.\t1")  # no final newline either
    assert read_sentiment_file(p) == [("Fine.", 1), ("Bad \x85 really.", 0), ("A\ttab inside.", 1)]


def test_real_files(shared_data):
    data = load_sentiment(shared_data)
    assert len(data) == 3000
    assert Counter(x.label for x in data) == {0: 1500, 1: 1500}
    assert Counter(x.domain for x in data) == {d: 1000 for d in DOMAINS}
    imdb = read_sentiment_file(shared_data / "sentiment" / "imdb_labelled.txt")
    assert len(imdb) == 1000 and not any(s != s.strip() for s, _ in imdb)


# ---------------------------------------------------------------- download (no network: file:// URLs)
def _zip(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items(): z.writestr(name, text)
    return path


def test_download_refuses_wrong_checksum(tmp_path):
    fake = _zip(tmp_path / "fake.zip", {"sentiment labelled sentences/yelp_labelled.txt": "Great food.\t1\n"})
    with pytest.raises(ValueError, match="sha256 mismatch"): download_sentiment(tmp_path / "cache", url=fake.as_uri())
    out = tmp_path / "cache" / "sentiment"
    assert not list(out.glob("*.txt")) and not list(out.glob("*.zip"))  # nothing kept, nothing extracted


def test_download_extracts_verified_archive(tmp_path):
    "With the archive's own checksum, the three data files are extracted (the macOS resource forks are not)."
    files = {f"sentiment labelled sentences/{f}": f"{d} is great.\t1\n{d} is bad.\t0\n" for d, f in DOMAINS.items()}
    files["__MACOSX/sentiment labelled sentences/._yelp_labelled.txt"] = "junk"
    fake = _zip(tmp_path / "fake.zip", files)
    sha = hashlib.sha256(fake.read_bytes()).hexdigest()
    out = download_sentiment(tmp_path / "cache", url=fake.as_uri(), sha256=sha)
    assert sorted(p.name for p in out.glob("*.txt")) == sorted(DOMAINS.values())
    data = load_sentiment(tmp_path / "no-data-here", cache_dir=tmp_path / "cache")  # falls back to the cache
    assert [(x.domain, x.label) for x in data] == [(d, y) for d in DOMAINS for y in (1, 0)]
    assert (out / "yelp_labelled.txt").read_text() == "yelp is great.\t1\nyelp is bad.\t0\n"


# ---------------------------------------------------------------- split and vocabulary
def _toy_data():
    from annotated_transformer.before.sentiment_data import LabelledSentence
    data = [LabelledSentence(f"{d} sentence {i} {'good' if y else 'bad'}", y, d) for d in DOMAINS for y in (0, 1) for i in range(40)]
    return data + [LabelledSentence("Great phone.", 1, "amazon")] * 3 + [LabelledSentence("great PHONE.", 1, "amazon")]


def test_split_stratified_deterministic_no_leak():
    data = _toy_data()
    s = split_sentiment(data, seed=3)
    assert sum(map(len, s.values())) == len(data)
    for d in DOMAINS:
        for y in (0, 1):
            assert len({x.text.lower() for x in s["test"] if x.domain == d and x.label == y}) == 6  # 40 or 41 distinct: 28|29 / 6 / 6
    where = {k for k, v in s.items() for x in v if x.text.lower() == "great phone."}
    assert len(where) == 1  # the four copies of one sentence land in one split
    assert split_sentiment(data, seed=3) == s and split_sentiment(data, seed=4) != s


def test_vocab_from_train_only():
    v = Vocab(["good good movie", "bad bad movie", "once"])
    assert v.itos[:3] == list(SPECIALS) and "once" not in v.stoi  # min_freq 2
    assert v.encode("Good unseen movie!") == [v.stoi["good"], v.unk_idx, v.stoi["movie"], v.unk_idx]
    assert tokenize("Don't buy it!!") == ["don't", "buy", "it", "!", "!"]


# ---------------------------------------------------------------- attention pooling
def test_attention_pooling_weights():
    torch.manual_seed(0)
    pool = AttentionPooling(6, 5)
    states = torch.randn(3, 7, 6)  # (B, S, D)
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[1, 4:] = True; mask[2, 1:] = True
    c, a = pool(states, mask)
    assert c.shape == (3, 6) and a.shape == (3, 7)
    torch.testing.assert_close(a.sum(-1), torch.ones(3))
    assert (a[mask] == 0).all() and (a[~mask] > 0).all()
    torch.testing.assert_close(c, (a.unsqueeze(-1) * states).sum(1))
    torch.testing.assert_close(c[2], states[2, 0])  # a single real word gets all the weight
    e = pool.v(torch.tanh(pool.w(states[0]))).squeeze(-1)  # v^T tanh(W h_t + b), written out
    torch.testing.assert_close(a[0], e.softmax(0))


def test_padding_content_does_not_matter():
    "Whatever the padded states hold, the pooled vector and the weights are the same."
    torch.manual_seed(0)
    pool = AttentionPooling(4)
    states, mask = torch.randn(1, 5, 4), torch.tensor([[False, False, False, True, True]])
    other = states.clone(); other[0, 3:] = 1e4
    for x, y in zip(pool(states, mask), pool(other, mask)): torch.testing.assert_close(x, y)


# ---------------------------------------------------------------- classifiers: padding invariance
@pytest.mark.parametrize("name", ["lstm-last", "lstm-attention", "transformer-mean", "transformer-first"])
def test_padding_invariance(name):
    torch.manual_seed(0)
    m = make_classifier(name, 30, d_model=16, n_heads=2, d_ff=32).eval()
    sents = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15]]
    batch = m(*make_batch(sents))
    for i, s in enumerate(sents): torch.testing.assert_close(m(*make_batch([s]))[0], batch[i], atol=1e-5, rtol=1e-5)
    src, mask = make_batch(sents)
    src2 = torch.where(mask, torch.full_like(src, 29), src)  # other ids at the padded positions (still masked)
    torch.testing.assert_close(m(src2, mask), batch, atol=1e-5, rtol=1e-5)


def test_lstm_last_state_is_last_real_word():
    torch.manual_seed(0)
    m = LSTMClassifier(20, 8, "last").eval()
    src, mask = make_batch([[5, 6, 7], [3, 4, 5, 6, 7, 8]])
    out, _ = m.rnn(m.embed(torch.tensor([[5, 6, 7]])))  # the sentence alone, no padding at all
    torch.testing.assert_close(m(src, mask)[0], m.classifier(out[0, -1]), atol=1e-6, rtol=1e-6)


def test_lstm_attention_weights_zero_on_padding():
    torch.manual_seed(0)
    m = LSTMClassifier(20, 8, "attention").eval()
    logits, a = m(*make_batch([[5, 6, 7], [3, 4, 5, 6, 7, 8]]), need_weights=True)
    assert logits.shape == (2, 2) and a.shape == (2, 6)
    assert (a[0, 3:] == 0).all()
    torch.testing.assert_close(a.sum(-1), torch.ones(2))


def test_bad_pooling_names():
    with pytest.raises(ValueError, match="pooling"): LSTMClassifier(10, pooling="mean")
    with pytest.raises(ValueError, match="pooling"): TransformerClassifier(10, pooling="last")
    with pytest.raises(ValueError, match="unknown model"): make_classifier("gru", 10)


# ---------------------------------------------------------------- the experiment, tiny
def test_tiny_experiment_learns_and_writes(tmp_path, shared_data):
    "After 4 epochs the attention LSTM beats chance on test; results.json and runs.csv agree."
    res = run_experiment(tmp_path, models=("lstm-attention",), seeds=(0,), epochs=4,
                         data_dir=shared_data)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["runs"] == json.loads(json.dumps(res["runs"]))
    assert on_disk["runs"][0]["test_acc"] > 0.65
    assert on_disk["runs"][0]["dev_acc"] == max(on_disk["runs"][0]["dev_curve"])  # the epoch was chosen on dev
    rows = (tmp_path / "runs.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("lstm-attention,0,")


def test_length_batches_cover_every_sentence_once():
    import random
    from annotated_transformer.before.attention_classifier import length_batches
    lengths = [random.Random(0).randint(1, 40) for _ in range(1000)]
    batches = length_batches(lengths, 32, random.Random(1))
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(1000)) and all(1 <= len(b) <= 32 for b in batches)
    assert length_batches(lengths, 32, random.Random(1)) == batches != length_batches(lengths, 32, random.Random(2))
    pad = sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)
    assert pad < 0.2 * sum(lengths)  # grouped by length: little padding
