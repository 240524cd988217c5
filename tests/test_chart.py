"""The chart parser (20) end to end: at-train ptb-chart-sample trains, keeps the best checkpoint on dev F1 and resumes;
at-parse reads its checkpoints (trees over exactly the input words, EVALB with --gold) and refuses bad input in one line."""
import pytest
import torch
from annotated_transformer.commands.cli import train_main, parse_main
from annotated_transformer.engine.checkpoint import load_checkpoint, CheckpointError, write_checkpoint
from annotated_transformer.engine.runs import read_metrics
from annotated_transformer.engine.loading import load_model
from annotated_transformer.parsing.trees import parse_tree


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    "A 20-step ptb-chart-sample run (fp32), shared by the tests below."
    from conftest import SHARED_DATA
    if not (SHARED_DATA / "ptb_sample").is_dir(): pytest.skip(f"NLTK's sample not found in {SHARED_DATA}")
    run = tmp_path_factory.mktemp("chart") / "run"
    rc = train_main(["ptb-chart-sample", "--data-dir", str(SHARED_DATA), "--max-steps", "20", "--eval-every", "10", "--save-every", "10",
               "--precision", "fp32", "--run-dir", str(run), "--no-progress"])
    assert rc == 0
    return run


def test_train_keeps_the_best_dev_f1_and_resumes(trained, shared_data, cli):
    f1 = [r["val_f1"] for r in read_metrics(trained) if "val_f1" in r]
    assert len(f1) == 2 and all(0 <= v <= 100 for v in f1)
    best = load_checkpoint(trained / "best.pt")
    assert best.best["value"] == max(f1) and best.kind == "chart"
    assert best.tokenizer["kind"] == "chart"
    r = cli(train_main, "ptb-chart-sample", "--data-dir", shared_data, "--max-steps", "25", "--eval-every", "10", "--precision", "fp32",
            "--run-dir", trained, "--no-progress", "--resume")
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stdout and "dev F1" in r.stdout and load_checkpoint(trained).step == 25


def test_parse_prints_trees_over_the_input_words(trained, cli, tmp_path):
    text = "The dog saw a cat .\n\nPrices rose sharply in October .\n"  # the blank line is skipped and keeps its place
    r = cli(parse_main, "--checkpoint", trained / "best.pt", stdin=text)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "" and r.stderr.strip().endswith("; 1 blank line skipped"), (r.stdout, r.stderr)
    trees = [parse_tree(l) for l in r.stdout.splitlines() if l]
    assert [t.words() for t in trees] == [l.split() for l in text.splitlines() if l] and all(t.label == "TOP" for t in trees)
    gold = tmp_path / "gold.txt"
    gold.write_text("(TOP (S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)))\n")
    g = cli(parse_main, "--checkpoint", trained, "--gold", gold)
    assert g.returncode == 0 and "EVALB (COLLINS.prm)" in g.stderr and parse_tree(g.stdout.strip()).words() == "The dog saw a cat .".split()


def test_parse_refuses_bad_input_in_one_line(trained, cli, tmp_path):
    r = cli(parse_main, "--checkpoint", trained, stdin=b"one two\ncaf\xe9\n")
    assert r.returncode == 1 and "<stdin>, line 2: invalid UTF-8" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    long = cli(parse_main, "--checkpoint", trained, stdin="w " * 400 + "\n")
    assert long.returncode == 1 and "line 1: 400 words; this model parses at most 298" in long.stderr
    ck = load_checkpoint(trained / "best.pt"); ck.tokenizer["labels"] = ck.tokenizer["labels"][:-1]
    write_checkpoint(ck, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="sized for another vocabulary"): load_model(tmp_path / "bad.pt", "at-parse")
    out = tmp_path / "trees.txt"
    bad = cli(parse_main, "--checkpoint", tmp_path / "bad.pt", "--output", out, stdin="a b\n")
    assert bad.returncode == 1 and not out.exists()  # nothing half-written


def test_an_ensemble_parses_and_refuses_parsers_that_do_not_fit(trained, cli, tmp_path):
    "Several chart checkpoints parse as one ensemble (mean label log-probabilities); an ensemble of one model twice is that model."
    from annotated_transformer.parsing.chart import chart_parse, ensemble_scores
    from annotated_transformer.parsing.chart_vocab import chart_batch
    cks = sorted(trained.glob("ckpt_*.pt"))
    assert len(cks) >= 2
    models, vocab = load_model(cks[:2])
    assert isinstance(models, list) and len(models) == 2
    sents = [s.split() for s in ("The dog saw a cat .", "Prices rose sharply in October .", "Go")]
    x = chart_batch(vocab, sents)
    with torch.no_grad(): s = models[0](x.words, x.chars, x.lengths)
    assert torch.allclose(ensemble_scores([s, s]), s, atol=1e-4)  # the empty column is 0: log-ratios are the scores
    assert [str(t) for t in chart_parse([models[0], models[0]], vocab, sents)] == [str(t) for t in chart_parse(models[0], vocab, sents)]
    both = chart_parse(models, vocab, sents)
    assert [t.words() for t in both] == sents
    r = cli(parse_main, "--checkpoint", cks[0], cks[1], stdin="The dog saw a cat .\nGo\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(t) for t in chart_parse(models, vocab, [sents[0], sents[2]])]
    # the Python API checks its arguments; the command names the checkpoint that does not fit, in one line, and writes nothing
    with pytest.raises(ValueError, match="empty ensemble"): chart_parse([], vocab, sents)
    with pytest.raises(TypeError, match=r"model\[1\]: a str"): chart_parse([models[0], "x"], vocab, sents)
    from annotated_transformer.parsing.chart_vocab import ChartVocab
    with pytest.raises(ValueError, match=r"model\[0\]: sized for another vocabulary"):
        chart_parse(models, ChartVocab(vocab.words, vocab.chars, vocab.labels[:-1]), sents)
    ck = load_checkpoint(cks[0]); ck.tokenizer["words"] = ck.tokenizer["words"][:-1] + ["<other>"]
    write_checkpoint(ck, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="vocabulary differs"): load_model([cks[0], tmp_path / "other.pt"])
    out = tmp_path / "trees.txt"
    bad = cli(parse_main, "--checkpoint", cks[0], tmp_path / "other.pt", "--output", out, stdin="a b\n")
    assert bad.returncode == 1 and "other.pt: its vocabulary differs" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cky_on_cuda_equals_cpu():
    from annotated_transformer.parsing.spans import cky
    torch.manual_seed(0)
    s = torch.randn(4, 9, 9, 6); s[..., 0] = 0
    lengths = torch.tensor([8, 3, 1, 5])
    cpu, gpu = cky(s, lengths), cky(s.cuda(), lengths.cuda())
    assert cpu[0] == gpu[0] and torch.allclose(cpu[1], gpu[1].cpu())


def test_subword_words_train_and_parse(tmp_path, shared_data, cli):
    "--word-features subwords: the vocabulary carries BPE pieces, the checkpoint rebuilds the model without a word table, at-parse uses it."
    if not (shared_data / "ptb_sample").is_dir(): pytest.skip(f"NLTK's sample not found in {shared_data}")
    run = tmp_path / "sub"
    r = cli(train_main, "ptb-chart-sample", "--data-dir", shared_data, "--max-steps", "6", "--eval-every", "6", "--precision", "fp32",
            "--word-features", "subwords", "--run-dir", run, "--no-progress")
    assert r.returncode == 0, r.stderr
    ck = load_checkpoint(run)
    assert ck.model_config["word_features"] == "subwords" and ck.tokenizer["pieces"] is not None
    assert not any(k.startswith("word_embed") for k in ck.weights)
    p = cli(parse_main, "--checkpoint", run, stdin="Unbelievably , it worked .\n")
    assert p.returncode == 0 and parse_tree(p.stdout.strip()).words() == "Unbelievably , it worked .".split()
    bad = cli(train_main, "ptb-chart-sample", "--word-features", "letters", "--run-dir", tmp_path / "x")
    assert bad.returncode == 2 and "--word-features" in bad.stderr


def test_span_loss_from_flat_scores_equals_the_chart():
    "Training's span loss reads the classifier's scores without filling the chart: the same loss and gradients as from the chart's cells."
    from annotated_transformer.parsing.chart import ChartParser, ChartConfig, span_loss
    torch.manual_seed(0)
    model = ChartParser(ChartConfig(n_words=30, n_chars=20, n_labels=6, n_layers=1, d_model=16, n_heads=2, d_ff=32, d_label=8)).eval()
    B, N = 3, 7
    lengths = torch.tensor([7, 4, 1])
    words = torch.randint(4, 30, (B, N + 2)); chars = torch.randint(4, 20, (B, N + 2, 3))
    gold = torch.randint(0, 6, (B, N + 1, N + 1))
    flat = span_loss(model(words, chars, lengths, chart=False), gold, lengths)
    g_flat = torch.autograd.grad(flat, list(model.parameters()))
    chart = model(words, chars, lengths)  # (B, N+1, N+1, L)
    by_cell = sum(torch.nn.functional.cross_entropy(chart[b, i, j][None], gold[b, i, j][None], reduction="sum")
                  for b in range(B) for i in range(N) for j in range(i + 1, int(lengths[b]) + 1))
    g_cell = torch.autograd.grad(by_cell, list(model.parameters()))
    torch.testing.assert_close(flat, by_cell)
    for a, b in zip(g_flat, g_cell): torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def _chart_batch_one_cell_at_a_time(vocab, sentences, trees, max_chars=20):
    "chart_batch as it was first written: every row and cell filled one at a time (the reference for the faster one)."
    from annotated_transformer.parsing.chart_vocab import PAD, UNK, BOS, EOS
    from annotated_transformer.parsing.spans import tree_spans
    from annotated_transformer.training.data import SubwordTokenizer
    n, N = [len(s) for s in sentences], max(len(s) for s in sentences)
    units = [[vocab.units(w)[:max_chars] for w in s] for s in sentences]
    C = max(len(u) for us in units for u in us)
    words = torch.full((len(n), N + 2), PAD, dtype=torch.long); chars = torch.full((len(n), N + 2, C), PAD, dtype=torch.long)
    bos, eos = (SubwordTokenizer.bos_id, SubwordTokenizer.eos_id) if vocab.pieces else (BOS, EOS)
    for b, s in enumerate(sentences):
        words[b, : len(s) + 2] = torch.tensor([BOS] + [vocab.word_id.get(w, UNK) for w in s] + [EOS])
        chars[b, 0, 0], chars[b, len(s) + 1, 0] = bos, eos
        for k, u in enumerate(units[b]): chars[b, k + 1, : len(u)] = torch.tensor(u)
    gold = torch.zeros(len(n), N + 1, N + 1, dtype=torch.long); spans = []
    for b, t in enumerate(trees):
        ss = [(i, j, vocab.label_id[l]) for i, j, l in tree_spans(t)[2] if l in vocab.label_id]
        for i, j, l in ss: gold[b, i, j] = l
        spans.append(ss)
    return words, chars, gold, spans


@pytest.mark.parametrize("subwords", [0, 400])
def test_chart_batch_equals_the_cell_by_cell_reference(subwords):
    "The batch built from whole rows equals the one filled cell by cell: words, characters or pieces, gold chart and spans."
    from annotated_transformer.parsing.chart_vocab import ChartVocab, chart_batch
    trees = [parse_tree(s) for s in [
        "(TOP (S (NP (PRP She)) (VP (VBD saw) (NP (NNS stars))) (. .)))",
        "(TOP (S (NP (DT The) (NN dog)) (VP (VBD slept)) (. .)))",
        "(TOP (S (NP (PRP He)) (VP (VBD ate) (NP (DT an) (NN apple)) (PP (IN in) (NP (DT the) (NN park)))) (. .)))",
        "(TOP (S (VP (VB Go) (ADVP (RB home)))))",
        "(TOP (S (NP (NNS Extraordinarily-long-hyphenated-words)) (VP (VBP bark)) (. .)))"]] * 3
    vocab = ChartVocab.from_trees(trees, subwords=subwords)
    batch = chart_batch(vocab, [t.words() for t in trees], trees)
    words, chars, gold, spans = _chart_batch_one_cell_at_a_time(vocab, [t.words() for t in trees], trees)
    assert torch.equal(batch.words, words) and torch.equal(batch.chars, chars) and torch.equal(batch.gold, gold) and batch.gold_spans == spans
    if not subwords: assert batch.chars.size(2) == 20  # the long word's characters are cut at max_chars
    bare = chart_batch(vocab, [["unseen", "words"], ["x"]])
    assert bare.gold is None and bare.words.tolist()[1][:3] == [2, 1, 3]


def _chart_study():
    "tools/chart_study.py as a module (it is a script, not part of the package), so its command line is checked in this process."
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("chart_study", Path(__file__).resolve().parents[1] / "tools" / "chart_study.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

_RECORDS = {"dev22.json": "{}\n", "decoding.json": '{"command": "python tools/chart_study.py decode runs/a runs/b"}\n'}  # other commands' files

@pytest.mark.parametrize("args, says", [
    ([], "expected a command"),
    (["nonsense"], "expected a command"),
    (["test23"], "expected RUN"),
    (["test23-ensemble", "RUN"], "expected two or more"),
    (["dev", "RUN", "--out", "x.json"], "--out is an option of ensemble, test23, test23-ensemble only"),
    (["test23", "RUN", "--out", "x.txt"], "--out expects one file name NAME.json"),
    (["test23", "RUN", "--out", "sub/x.json"], "--out expects one file name NAME.json"),
    (["ensemble", "RUN", "--out", "x.json", "RUN"], "--out expects one file name NAME.json"),
    (["test23", "RUN", "--out", "dev22.json"], "results/ptb-chart/dev22.json is not a record of chart_study.py test23"),
    (["ensemble", "RUN", "RUN", "--out", "decoding.json"], "results/ptb-chart/decoding.json is not a record of chart_study.py ensemble"),
    (["test23", "missing-run"], "missing-run: not a run directory or checkpoint file"),
    (["average", "RUN"], "no best.pt"),
    (["test23", "EMPTY.pt"], "chart_study.py test23: "),  # a damaged checkpoint: found only when it is read
    (["test23-ensemble", "RUN", "EMPTY.pt"], "chart_study.py test23-ensemble: "),
])
def test_chart_study_refuses_a_bad_command_line_in_one_line(tmp_path, monkeypatch, args, says):
    """tools/chart_study.py, the script behind 20's results: a bad command, count, --out, run directory or checkpoint is one line,
    exit 1, nothing written, no folder left behind; --out never overwrites another command's results file."""
    (tmp_path / "RUN").mkdir(); (tmp_path / "EMPTY.pt").write_bytes(b"")
    if "--out" in args and args[-1] in _RECORDS:
        (tmp_path / "results" / "ptb-chart").mkdir(parents=True); (tmp_path / "results" / "ptb-chart" / args[-1]).write_text(_RECORDS[args[-1]])
    def listing():  # every path under tmp_path, with each file's text: what the command must leave as it found it
        return sorted(str(p.relative_to(tmp_path)) + ":" + (p.read_text() if p.is_file() else "") for p in tmp_path.rglob("*"))
    before = listing()
    mod, threads = _chart_study(), torch.get_num_threads()
    monkeypatch.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as e: mod.main(args)
    finally: torch.set_num_threads(threads)  # main sets the thread count from OMP_NUM_THREADS once the command line is good
    said = str(e.value.code)
    assert says in said and "\n" not in said and said.startswith("chart_study.py"), said  # sys.exit(message): exit status 1
    assert listing() == before


def _tiny_chart_parsers(n=2):
    "A few trees, their vocabulary and `n` small untrained parsers of it (seeds 0..n-1)."
    from annotated_transformer.parsing.chart_vocab import ChartVocab
    from annotated_transformer.parsing.chart import ChartParser, ChartConfig
    trees = [parse_tree(s) for s in [
        "(TOP (S (NP (PRP She)) (VP (VBD saw) (NP (NNS stars))) (. .)))", "(TOP (S (NP (DT The) (NN dog)) (VP (VBD slept)) (. .)))",
        "(TOP (S (NP (PRP He)) (VP (VBD ate) (NP (DT an) (NN apple)) (PP (IN in) (NP (DT the) (NN park)))) (. .)))",
        "(TOP (S (VP (VB Go) (ADVP (RB home)))))", "(TOP (S (NP (NNS Dogs)) (VP (VBP bark)) (. .)))"]]
    vocab = ChartVocab.from_trees(trees, min_count=1)
    models = []
    for seed in range(n):
        torch.manual_seed(seed)
        models.append(ChartParser(vocab.sized(ChartConfig(n_layers=1, d_model=32, n_heads=4, d_ff=64, d_label=16))).eval())
    return trees, vocab, models


def test_decoding_sums_count_with_eval_sums_what_parsing_counts(monkeypatch):
    "tools/chart_study.py decode and ensemble count brackets with the trainer's `ChartObjective.eval_sums`, as `chart_parse` + EVALB would."
    from annotated_transformer.parsing.chart import ChartObjective, chart_parse
    from annotated_transformer.parsing.chart_choices import decoding_sums, decoding_choices, ensemble_choices
    from annotated_transformer.parsing.evalb import evalb, with_tags
    trees, vocab, (m1, m2) = _tiny_chart_parsers(2)
    calls, eval_sums = [], ChartObjective.eval_sums
    monkeypatch.setattr(ChartObjective, "eval_sums", lambda self, model, batch: calls.append(len(batch)) or eval_sums(self, model, batch))
    sums = decoding_sums([m1, m2], vocab, trees, decoding_choices(), batch_size=2)
    assert len(calls) == 3 * len(decoding_choices()) and sum(calls) == len(trees) * len(decoding_choices())  # no second copy of the count
    def by_parse(models):
        s = evalb(trees, [with_tags(p, g) for p, g in zip(chart_parse(models, vocab, [t.words() for t in trees]), trees)])["all"]
        return [s["matched"], s["gold_brackets"], s["test_brackets"], len(trees)]
    assert sums["raw scores (the package)"].tolist() == by_parse(m1)
    assert sums["two checkpoints: mean log-probabilities"].tolist() == by_parse([m1, m2])
    ens = decoding_sums([m1, m2], vocab, trees, ensemble_choices(2), batch_size=5)
    assert list(ens) == [(0,), (1,), (0, 1)] and ens[(0, 1)].tolist() == by_parse([m1, m2]) and ens[(1,)].tolist() == by_parse(m2)


def test_shifted_and_thresholded_charts():
    "A large constant on every non-empty label makes CKY bracket every span of a binary tree; a large negative one, only the root."
    from annotated_transformer.parsing.spans import cky
    from annotated_transformer.parsing.chart_choices import shift_labels, minus_threshold
    torch.manual_seed(0)
    s = torch.randn(2, 7, 7, 4); s[..., 0] = 0
    lengths = torch.tensor([6, 3])
    assert torch.equal(shift_labels(s, 0.0), s) and (shift_labels(s, 2.0)[..., 0] == 0).all()
    assert [len(t) for t in cky(shift_labels(s, 100.0), lengths)[0]] == [2 * 6 - 1, 2 * 3 - 1]
    assert [len(t) for t in cky(shift_labels(s, -100.0), lengths)[0]] == [1, 1]
    p = minus_threshold(s, 0.4)
    assert (p[..., 0] == 0).all() and torch.allclose(p[..., 1:] + 0.4, s.softmax(-1)[..., 1:])
    assert [len(t) for t in cky(minus_threshold(s, 1.0), lengths)[0]] == [1, 1]  # no probability beats 1: only the root


def test_choose_checkpoint_keeps_best_unless_clearly_beaten():
    "The rule of tools/chart_study.py average, and the choice its record holds."
    import json
    from pathlib import Path
    from annotated_transformer.parsing.chart_choices import choose_checkpoint
    assert choose_checkpoint([89.90, 89.95, 90.0]) == 0 and choose_checkpoint([89.9, 90.01, 90.2, 90.0]) == 2
    assert choose_checkpoint([89.9, 89.95], margin=0) == 1
    rec = json.loads((Path(__file__).resolve().parents[1] / "results" / "ptb-chart" / "averaging.json").read_text())
    assert rec["rows"][choose_checkpoint([r["f1"] for r in rec["rows"]])]["checkpoint"] == rec["chosen"]


def test_parse_ships_the_parser_it_scored(trained, cli, tmp_path, monkeypatch):
    "`at-parse --gold TREES --ship NAME`: the checkpoint ships in the smallest precision that reproduces the F1 it printed."
    import json
    from annotated_transformer import pretrained
    monkeypatch.setenv("AT_PRETRAINED_DIR", str(tmp_path / "shipped"))
    gold = tmp_path / "gold.txt"
    gold.write_text("(TOP (S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)))\n"
                    "(TOP (S (NP (NNS Prices)) (VP (VBD rose) (ADVP (RB sharply)) (PP (IN in) (NP (NNP October)))) (. .)))\n")
    args = ["--checkpoint", trained / "best.pt", "--gold", gold, "--results", tmp_path / "res"]
    r = cli(parse_main, *args, "--ship", "tiny-chart")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "res" / "shipped.json").read_text())
    printed = float(r.stderr.split(" F1 ")[1].split()[0])
    assert round(rec["row"], 2) == printed and sorted(rec["scores"]) == ["bfloat16", "float16", "float32"]
    assert abs(rec["scores"][rec["stored"]]["f1"] - rec["row"]) <= 0.05 and "at-parse: shipped tiny-chart: " in r.stderr
    assert (tmp_path / "res" / "metrics.jsonl").read_bytes() == (trained / "metrics.jsonl").read_bytes()
    ck = load_checkpoint(tmp_path / "shipped" / "tiny-chart")
    prov = ck.more["provenance"]
    assert prov["checkpoint"] == "best.pt" and prov["steps"] == load_checkpoint(trained / "best.pt").step
    assert "ptb-chart-sample" in prov["command"] and prov["reproduces"]["value"] == rec["row"]
    m = cli(parse_main, "--model", "tiny-chart", stdin="The dog saw a cat .\n")
    assert m.returncode == 0 and parse_tree(m.stdout.strip()).words() == "The dog saw a cat .".split(), m.stderr
    assert type(pretrained("tiny-chart")).__name__ == "ConstituencyParser"
    # refused before anything is parsed or written: no --gold, no run, a shipped model, an ensemble, a name taken
    lone = tmp_path / "lone"; lone.mkdir(); (lone / "best.pt").write_bytes((trained / "best.pt").read_bytes())
    for argv, code, says in (
            (["--checkpoint", trained / "best.pt", "--results", tmp_path / "r2", "--ship", "x"], 2, "needs --gold"),
            (["--model", "tiny-chart", "--gold", gold, "--results", tmp_path / "r2", "--ship", "x"], 2, "needs one --checkpoint"),
            (["--checkpoint", trained / "best.pt", trained / "best.pt", "--gold", gold, "--results", tmp_path / "r2", "--ship", "x"],
             2, "needs one --checkpoint"),
            (["--checkpoint", trained / "best.pt", "--gold", gold, "--ship", "x"], 2, "needs --results"),
            ([*args[:4], "--results", tmp_path / "r2", "--ship", "tiny-chart"], 2, "exists; remove it or choose another name"),
            (["--checkpoint", lone / "best.pt", "--gold", gold, "--results", tmp_path / "r2", "--ship", "x"], 1,
             "no run.json beside it")):
        r = cli(parse_main, *argv)
        assert r.returncode == code and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (argv, r.stderr)
        assert not (tmp_path / "r2").exists() and not (tmp_path / "shipped" / "x").exists()
