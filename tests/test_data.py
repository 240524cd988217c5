"""Data pipeline: readers and their bad-input errors, recipes, tokenizer round trip, batching invariants."""
import gzip
from pathlib import Path

import pytest
import torch

from annotated_transformer.training.data import Corpus, SubwordTokenizer, copy_task_pairs, encode_pairs, read_lines, read_parallel, default_data_dir, fetch, sha256_file
from annotated_transformer.engine.recipes import MULTI30K_SHA256, download_multi30k, load_recipe
from annotated_transformer.training.batching import TokenBatchSampler, ShardedTokenBatchSampler, collate, make_loader

MULTI30K = default_data_dir() / "multi30k"
needs_multi30k = pytest.mark.skipif(not (MULTI30K / "train.de.gz").is_file(),
                                    reason=f"shared Multi30k not found at {MULTI30K} (set AT_DATA_DIR)")

SENTS = ["Ein Hund läuft über die Wiese.", "Zwei Kinder spielen Fußball im Park.", "Eine Frau liest ein Buch.",
         "A dog runs across the meadow.", "Two children play football in the park.", "A woman reads a book."] * 20


def write(path, text, enc="utf-8"):
    path.write_bytes(text.encode(enc) if isinstance(text, str) else text)
    return path


@pytest.fixture(scope="module")
def tok():
    return SubwordTokenizer.train(SENTS, vocab_size=300)


# ---- bad input ----------------------------------------------------------------------------------------------

def test_missing_file_names_path_and_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.de: file not found"):
        read_lines(tmp_path / "nope.de")
    with pytest.raises(FileNotFoundError) as e:
        load_recipe("multi30k", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert str(tmp_path / "multi30k" / "train.de") in str(e.value) and "download_multi30k" in str(e.value)
    with pytest.raises(FileNotFoundError, match="prepare-iwslt14.sh"):
        load_recipe("iwslt14", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="statmt.org"):
        load_recipe("wmt14", "newstest2014", data_dir=tmp_path)


def test_unequal_line_counts_names_both_files_and_counts(tmp_path):
    a, b = write(tmp_path / "a.de", "x\ny\nz\n"), write(tmp_path / "b.en", "x\ny\n")
    with pytest.raises(ValueError) as e:
        read_parallel(a, b)
    msg = str(e.value)
    assert f"{a} has 3 lines" in msg and f"{b} has 2" in msg


def test_blank_pairs_dropped_and_counted(tmp_path):
    a = write(tmp_path / "a.de", "eins\n\ndrei\n  \nfünf\n")
    b = write(tmp_path / "b.en", "one\ntwo\nthree\nfour\n\n")
    c = read_parallel(a, b)
    assert (c.src, c.tgt) == (["eins", "drei"], ["one", "three"])
    assert c.stats == dict(read=5, blank=3, kept=2)
    assert "blank=3" in c.summary()


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, gz):
    data = "gut\nauch gut\nschlecht \xe4\n".encode("latin-1")
    p = tmp_path / ("bad.de.gz" if gz else "bad.de")
    if gz:
        with gzip.open(p, "wb") as f: f.write(data)
    else: p.write_bytes(data)
    with pytest.raises(ValueError, match=rf"{p.name}, line 3: invalid UTF-8"):
        read_lines(p)


def test_read_lines_from_stdin_and_a_directory(tmp_path, monkeypatch):
    "'-' reads standard input (the scripts' default), line endings as in a file; a directory is refused by name."
    import io, sys
    for data, want in ((b"a b\r\n\nc\n", ["a b", "", "c"]), (b"x", ["x"]), (b"", [])):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert read_lines("-") == want
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\ncaf\xe9\n")))
    with pytest.raises(ValueError, match=r"<stdin>, line 2: invalid UTF-8"): read_lines("-")
    with pytest.raises(ValueError, match=rf"{tmp_path.name}: is a directory"): read_lines(tmp_path)


def test_too_long_pairs_filtered_and_counted_never_truncated():
    src = [[3] * n for n in (1, 5, 9, 10, 3)]
    tgt = [[4] * n for n in (2, 9, 1, 3, 10)]
    c = Corpus(src, tgt, "toy")
    pairs = encode_pairs(c, max_len=10)  # sequences of 9 ids + EOS fit; 10 ids + EOS do not
    assert pairs == [(src[i], tgt[i]) for i in (0, 1, 2)]
    assert c.stats["too_long"] == 2 and c.stats["kept"] == 3
    # a pair over the token budget is refused by the sampler, not cut
    with pytest.raises(ValueError, match="pair 1 has 30 source"):
        TokenBatchSampler([5, 30], [5, 5], max_tokens=24)


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(ValueError, match="unknown recipe 'multi31k'; known recipes: copy, folder, iwslt14, multi30k") as e:
        load_recipe("multi31k")
    assert "wmt14" in str(e.value)  # other modules (parsing) may have registered more recipes in this process


def test_recipe_files_of_a_made_recipe():
    "The copy task and function recipes are made, not read: `recipe_files` says so (it raised KeyError: 'copy')."
    from annotated_transformer.engine.recipes import recipe_files, register_recipe, RECIPES
    with pytest.raises(ValueError, match="recipe 'copy' is made by a function; it names no files"): recipe_files("copy")
    register_recipe("made-here", lambda split, data_dir=None, **kw: None)
    try:
        with pytest.raises(ValueError, match="recipe 'made-here' is made by a function"): recipe_files("made-here")
    finally: RECIPES.pop("made-here")
    with pytest.raises(ValueError, match="unknown recipe 'multi31k'"): recipe_files("multi31k")


def test_gzip_and_crlf(tmp_path):
    with gzip.open(tmp_path / "a.gz", "wt", encoding="utf-8") as f: f.write("a b\r\nc\n")
    assert read_lines(tmp_path / "a.gz") == ["a b", "c"]


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    "Files saved by some Windows editors start with U+FEFF, which became part of the first sentence"
    (tmp_path / "bom.de").write_bytes("\ufeffein Hund\nzwei\ufeff\n".encode("utf-8"))
    assert read_lines(tmp_path / "bom.de") == ["ein Hund", "zwei\ufeff"]  # only a leading mark is one


def test_a_cut_gzip_file_is_one_error_naming_it(tmp_path):
    "A .gz cut short raised gzip's EOFError, naming no file"
    with gzip.open(tmp_path / "a.gz", "wt", encoding="utf-8") as f: f.write("".join(f"line {i}\n" for i in range(5000)))
    raw = (tmp_path / "a.gz").read_bytes(); (tmp_path / "a.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"a\.gz, line \d+: could not be read \(Compressed file ended"):
        read_lines(tmp_path / "a.gz")


# ---- download checksum logic (local files only, never the network) ------------------------------------------

def test_fetch_verifies_sha256(tmp_path):
    src = write(tmp_path / "f.txt", "payload\n")
    good = sha256_file(src)
    out = fetch(src.as_uri(), tmp_path / "cache" / "f.txt", good)
    assert out.read_text() == "payload\n"
    with pytest.raises(ValueError, match="sha256 mismatch"):
        fetch(src.as_uri(), tmp_path / "cache" / "g.txt", "f" * 64)
    assert not list((tmp_path / "cache").glob("g.txt*"))  # nothing half-written left behind
    # an existing file with the right checksum is not fetched again (the URL is never opened)
    assert fetch("file:///does/not/exist", out, good) == out


@needs_multi30k
def test_download_multi30k_from_a_local_mirror(tmp_path):
    d = download_multi30k(tmp_path / "cache", base_url=MULTI30K.as_uri() + "/")
    assert sorted(p.name for p in d.iterdir()) == sorted(MULTI30K_SHA256)
    assert load_recipe("multi30k", "val", data_dir=tmp_path / "nowhere", cache_dir=tmp_path / "cache").stats["kept"] == 1014


def test_download_rejects_a_tampered_mirror(tmp_path):
    mirror = tmp_path / "mirror"; mirror.mkdir()
    for name in MULTI30K_SHA256:
        with gzip.open(mirror / name, "wt") as f: f.write("not the real data\n")
    with pytest.raises(ValueError, match="train.de.gz: sha256 mismatch"):
        download_multi30k(tmp_path / "cache", base_url=mirror.as_uri() + "/")


# ---- recipes --------------------------------------------------------------------------------------------------

def test_copy_task():
    pairs = copy_task_pairs(100, vocab_size=12, min_len=2, max_len=7, seed=3)
    assert pairs == copy_task_pairs(100, vocab_size=12, min_len=2, max_len=7, seed=3)
    assert pairs != copy_task_pairs(100, vocab_size=12, min_len=2, max_len=7, seed=4)
    assert all(s == t and 2 <= len(s) <= 7 and 3 <= min(s) and max(s) < 12 for s, t in pairs)
    with pytest.raises(ValueError, match="low"):
        copy_task_pairs(3, vocab_size=3)


@needs_multi30k
def test_multi30k_recipe():
    train, val = load_recipe("multi30k"), load_recipe("multi30k", "val")
    assert (len(train), len(val)) == (29000, 1014)
    assert train[0] == ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
                        "Two young, White males are outside near many bushes.")


@pytest.mark.skipif(not (default_data_dir() / "wmt14" / "newstest2013.en").is_file(), reason="shared wmt14 not found")
def test_newstest2013_recipe():
    c = load_recipe("wmt14", "newstest2013")
    assert len(c) == 3000 and c[0][0] == "A Republican strategy to counter the re-election of Obama"


# ---- tokenizer ------------------------------------------------------------------------------------------------

def test_tokenizer_special_ids_and_round_trip(tok, tmp_path):
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.vocab_size == 300
    texts = SENTS[:6] + ["  doppelte  Leerzeichen ", "unseen: Ωμέγα 🤖 \t tab", ""]
    for x in texts:
        assert tok.decode(tok.encode(x)) == x
    assert 3 not in [i for x in texts for i in tok.encode(x)]  # byte fallback: no <unk>
    tok.save(tmp_path / "ckpt")
    again = SubwordTokenizer.load(tmp_path / "ckpt")
    assert again.encode(texts) == tok.encode(texts)
    assert SubwordTokenizer.from_state_dict(tok.state_dict()).encode(texts) == tok.encode(texts)


def test_tokenizer_training_is_deterministic():
    assert SubwordTokenizer.train(SENTS, vocab_size=300).model_proto == SubwordTokenizer.train(SENTS, vocab_size=300).model_proto


def test_tokenizer_refuses_heldout_split():
    with pytest.raises(ValueError, match="training split only"):
        SubwordTokenizer.from_corpus(Corpus(["a"], ["b"], "toy", split="val"))


@needs_multi30k
def test_multi30k_round_trip_every_training_line():
    train = load_recipe("multi30k")
    tok = SubwordTokenizer.from_corpus(train, vocab_size=8000)
    lines = train.src + train.tgt
    assert tok.decode(tok.encode(lines)) == lines


# ---- batches --------------------------------------------------------------------------------------------------

def test_batch_fields_and_masks():
    pairs = [([5, 6, 7], [8, 9]), ([4], [4, 5, 6, 7]), ([3, 3], [3])]
    b = collate(pairs)
    B, S, T = 3, 4, 5
    assert b.src.shape == (B, S) and b.tgt_in.shape == (B, T) and b.tgt_out.shape == (B, T)
    for i, (s, t) in enumerate(pairs):
        assert b.src[i].tolist() == s + [2] + [0] * (S - len(s) - 1)
        assert b.tgt_in[i].tolist() == [1] + t + [0] * (T - len(t) - 1)
        assert b.tgt_out[i].tolist() == t + [2] + [0] * (T - len(t) - 1)
        assert b.src_key_padding_mask[i].tolist() == [j > len(s) for j in range(S)]
        assert b.tgt_key_padding_mask[i].tolist() == [j > len(t) for j in range(T)]
    assert b.src_key_padding_mask.dtype == b.tgt_key_padding_mask.dtype == torch.bool
    assert (b.n_src_tokens, b.n_tgt_tokens) == (int((b.src != 0).sum()), int((b.tgt_out != 0).sum())) == (9, 10)
    moved = b.to("cpu")
    assert torch.equal(moved.tgt_out, b.tgt_out) and moved.n_tgt_tokens == 10


def _pairs(n=300, seed=0):
    return copy_task_pairs(n, vocab_size=20, min_len=1, max_len=30, seed=seed)


def test_same_seed_same_batches_and_epochs_differ():
    pairs = _pairs()
    a = TokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=7)
    b = TokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=7)
    assert list(a) == list(b)
    a.set_epoch(1); b.set_epoch(1)
    assert list(a) == list(b)
    assert list(a) != list(TokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=7))  # epoch 0 differs
    assert list(a) != list(TokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=8))


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("max_tokens", [31, 64, 400])
def test_every_pair_exactly_once_across_ranks_with_equal_counts(world_size, max_tokens):
    pairs = _pairs(101)
    for epoch in (0, 1):
        shards = []
        for r in range(world_size):
            s = ShardedTokenBatchSampler.from_pairs(pairs, max_tokens=max_tokens, seed=1, rank=r, world_size=world_size)
            s.set_epoch(epoch)
            shards.append(list(s))
            assert len(s) == len(shards[-1])
        assert len({len(x) for x in shards}) == 1
        used = [i for x in shards for batch in x for i in batch]
        assert sorted(used) == list(range(len(pairs)))


@pytest.mark.parametrize("kw", [dict(max_tokens=31, seed=0), dict(max_tokens=400, seed=9), dict(max_tokens=100, shuffle=False)])
def test_one_rank_gets_the_plain_samplers_batches(kw):
    "make_loader's sampler on one process makes exactly TokenBatchSampler's batches, epoch by epoch (runs and resumes rely on it)"
    pairs = _pairs()
    plain, sharded = TokenBatchSampler.from_pairs(pairs, **kw), make_loader(pairs, **kw).batch_sampler
    capped = [TokenBatchSampler.from_pairs(pairs, max_sentences=5, **kw), ShardedTokenBatchSampler.from_pairs(pairs, max_sentences=5, **kw)]
    assert type(sharded) is ShardedTokenBatchSampler
    for epoch in (0, 1, 5):
        for s in (plain, sharded, *capped): s.set_epoch(epoch)
        assert list(sharded) == list(plain) and len(sharded) == len(plain)
        assert list(capped[1]) == list(capped[0]) and max(map(len, capped[1])) <= 5


def test_too_few_pairs_for_the_ranks_is_an_error():
    with pytest.raises(ValueError, match="cannot give 4 ranks"):
        ShardedTokenBatchSampler([3, 3, 3], [3, 3, 3], world_size=4).batches(0)


@pytest.mark.parametrize("max_tokens", [31, 50, 128, 1000])
def test_token_budget_never_exceeded(max_tokens):
    pairs = _pairs()
    for batch in make_loader(pairs, max_tokens=max_tokens, seed=2):
        assert batch.src.numel() <= max_tokens and batch.tgt_out.numel() <= max_tokens
        assert batch.n_src_tokens <= max_tokens and batch.n_tgt_tokens <= max_tokens


def test_resume_mid_epoch_reproduces_the_position():
    pairs = _pairs()
    full = ShardedTokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=5, rank=1, world_size=2)
    full.set_epoch(3)
    batches = list(full)
    resumed = ShardedTokenBatchSampler.from_pairs(pairs, max_tokens=100, seed=5, rank=1, world_size=2)
    resumed.set_epoch(3, start=4)
    assert list(resumed) == batches[4:] and len(resumed) == len(batches) - 4


def test_loader_batches_decode_to_the_text(tok):
    c = Corpus(SENTS[:60], SENTS[60:], "toy")
    pairs = encode_pairs(c, tok)
    loader = make_loader(pairs, max_tokens=200, seed=0)
    seen = 0
    for idx, batch in zip(loader.batch_sampler, loader):
        assert [tok.decode(r) for r in batch.src] == [c.src[i] for i in idx]
        assert [tok.decode(r) for r in batch.tgt_out] == [c.tgt[i] for i in idx]
        seen += len(batch)
    assert seen == 60


# ---- without the data: a failed download is one line, and a notebook that needs the data skips its rest ------------

def test_failed_download_is_one_line_and_leaves_nothing(tmp_path):
    with pytest.raises(OSError, match=r"gone\.txt: download failed .*copy the file to") as e:
        fetch((tmp_path / "gone.txt").as_uri(), tmp_path / "cache" / "gone.txt", "0" * 64)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()  # no .part, and no empty cache directory made for it


def _run_notebook(tmp_path, cells):
    import nbformat
    from nbdev.test import test_nb
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, tmp_path / "t.ipynb")
    return test_nb(tmp_path / "t.ipynb", showerr=False)[0]


def test_skip_rest_without_skips_only_when_the_data_is_missing(tmp_path):
    from annotated_transformer.training.data import skip_rest_without
    (tmp_path / "here.txt").write_text("x")
    head = "from annotated_transformer.training.data import skip_rest_without\n"
    fail = "raise AssertionError('a cell after the check ran')"
    # missing: the later cells do not run, so the notebook passes; present: they run, and the failing cell fails it
    assert _run_notebook(tmp_path, [head + f"skip_rest_without(lambda: open({str(tmp_path / 'gone.txt')!r}), 'X')", fail])
    assert not _run_notebook(tmp_path, [head + f"skip_rest_without(lambda: open({str(tmp_path / 'here.txt')!r}), 'X')", fail])
    # another error is not a missing file: it is raised, not skipped
    assert not _run_notebook(tmp_path, [head + "skip_rest_without(lambda: 1 / 0, 'X')", "pass"])
    # outside a notebook there is nothing to skip: the error is raised as it is
    with pytest.raises(FileNotFoundError):
        skip_rest_without(lambda: open(tmp_path / "gone.txt"), "X")
    assert skip_rest_without(lambda: None, "X") is True


@pytest.mark.slow
def test_notebooks_pass_without_data_or_network(tmp_path):
    """The README's notebook command on a machine without `shared/data` and without a network: every notebook passes,
    those that read a corpus skip their rest (no download is tried: the proxy refuses every connection)."""
    import os, subprocess
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "data").mkdir(); (tmp_path / "cache").mkdir()
    env = dict(os.environ, AT_DATA_DIR=str(tmp_path / "data"), AT_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               HTTPS_PROXY="http://127.0.0.1:9", no_proxy="", NO_PROXY="")
    r = subprocess.run(["nbdev_test"], cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not list((tmp_path / "cache").rglob("*.gz")), "a notebook downloaded data in a test"
