"Parsing (§6.3): tree reading, linearization, repair, the EVALB scorer on hand-worked examples and against the C program, and at-parse end to end."
import gzip, random, subprocess, sys
import pytest, torch
from annotated_transformer.parsing.parser import TreeConstraint, ParsingVocab, encode_trees, parse
from annotated_transformer.engine.parsing_runs import evaluate_decoding
from annotated_transformer.engine.loading import load_model
from annotated_transformer.parsing.trees import Tree, TreeError, parse_tree, parse_trees, read_trees, linearize, delinearize, ptb_trees, sample_trees
from annotated_transformer.parsing.evalb import evalb, evalb_sentence, evalb_brackets, with_tags, EvalbParams
from annotated_transformer.commands.cli import parse_main, train_main
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.architecture.model import make_model
from annotated_transformer.training.batching import make_loader
from annotated_transformer.engine.train import Trainer, seed_everything
from annotated_transformer.engine.config import TrainConfig
from annotated_transformer.engine.checkpoint import load_checkpoint

GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"

def score(gold, test): return evalb([parse_tree(gold)], [parse_tree(test)])["all"]

# ---------------------------------------------------------------- EVALB, worked by hand
def test_evalb_brackets_by_hand():
    # words after deleting '.': The cat sat on the mat (0..6); TOP and preterminals are not brackets
    b, words, length = evalb_brackets(parse_tree(GOLD))
    assert words == "The cat sat on the mat".split() and length == 7  # punctuation counts for the length
    assert dict(b) == {("S", 0, 6): 1, ("NP", 0, 2): 1, ("VP", 2, 6): 1, ("PP", 3, 6): 1, ("NP", 4, 6): 1}

def test_perfect_parse():
    s = score(GOLD, GOLD)
    assert (s["precision"], s["recall"], s["f1"], s["exact"], s["matched"]) == (100, 100, 100, 100, 5)

def test_one_wrong_label():  # NP(4,6) labelled ADJP: 4 of 5 brackets match on each side
    s = score(GOLD, GOLD.replace("(NP (DT the)", "(ADJP (DT the)"))
    assert (s["precision"], s["recall"], s["f1"], s["exact"]) == (80, 80, 80, 0)

def test_one_wrong_span():  # the PP covers "on the" and "mat" hangs from VP: PP(3,5) instead of PP(3,6), NP(4,6) gone
    test = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (DT the)) (NN mat)) (. .)))"
    s = score(GOLD, test)
    assert (s["matched"], s["gold_brackets"], s["test_brackets"]) == (3, 5, 4)
    assert s["precision"] == 75 and s["recall"] == 60 and abs(s["f1"] - 2 * 75 * 60 / 135) < 1e-9

def test_advp_prt_are_one_label():
    gold = "(TOP (S (NP (PRP He)) (VP (VBD gave) (PRT (RP up)))))"
    assert score(gold, gold.replace("(PRT", "(ADVP"))["f1"] == 100
    assert score(gold, gold.replace("(PRT", "(ADJP"))["f1"] < 100  # only that pair is merged

def test_punctuation_attachment_ignored():  # '.' inside the VP instead of under S: the spans over words are the same
    test = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))) (. .))))"
    assert score(GOLD, test)["f1"] == 100
    test2 = "(TOP (S (NP (DT The) (NN cat) (, ,)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"
    g2 = GOLD.replace("(NN cat))", "(NN cat)) (, ,)")  # a comma between NP and VP in gold, inside NP in test
    assert score(g2, test2)["f1"] == 100

def test_top_ignored():  # the same tree without the TOP bracket, or with another root bracket named TOP
    assert score(GOLD, GOLD[5:-1])["f1"] == 100
    assert evalb_brackets(parse_tree(GOLD))[0] == evalb_brackets(parse_tree(GOLD[5:-1]))[0]

def test_function_tags_and_empty_spans():
    gold = "(TOP (S (NP-SBJ (PRP He)) (VP (VBD left)) (PRN (, ,)) (. .)))"  # PRN holds only punctuation: empty span
    b, _, _ = evalb_brackets(parse_tree(gold))
    assert dict(b) == {("S", 0, 2): 1, ("NP", 0, 1): 1, ("VP", 1, 2): 1}

def test_unary_duplicates_are_a_multiset():
    gold = "(TOP (S (NP (NP (NN it))) (VP (VBZ works))))"
    s = score(gold, "(TOP (S (NP (NN it)) (VP (VBZ works))))")
    assert (s["matched"], s["gold_brackets"], s["test_brackets"]) == (3, 4, 3) and s["recall"] == 75

def test_length_mismatch_is_an_error_and_excluded():
    r = evalb_sentence(parse_tree(GOLD), parse_tree("(TOP (S (NP (DT The) (NN cat)) (. .)))"))
    assert "length unmatch" in r["error"]
    res = evalb([parse_tree(GOLD)] * 2, [parse_tree(GOLD), parse_tree("(TOP (S (NP (DT The) (NN cat)) (. .)))")])
    assert res["all"]["errors"] == 1 and res["all"]["f1"] == 100

def test_corpus_totals_are_micro_averaged():  # 5/5 and 3/(5 gold, 4 test): P = 8/9, R = 8/10
    test = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (DT the)) (NN mat)) (. .)))"
    s = evalb([parse_tree(GOLD)] * 2, [parse_tree(GOLD), parse_tree(test)])["all"]
    assert abs(s["precision"] - 800 / 9) < 1e-9 and abs(s["recall"] - 80) < 1e-9 and s["exact"] == 50

def test_cutoff_40():
    long = "(TOP (S " + " ".join(f"(NN w{i})" for i in range(41)) + "))"
    res = evalb([parse_tree(GOLD), parse_tree(long)], [parse_tree(GOLD), parse_tree(long)], EvalbParams())
    assert res["all"]["sentences"] == 2 and res["len<=40"]["sentences"] == 1

def test_gold_tags_decide_punctuation():  # the model's XX tags: the gold tags are put back before scoring
    test, _ = delinearize(linearize(parse_tree(GOLD)), parse_tree(GOLD).words())
    assert "length unmatch" in evalb_sentence(parse_tree(GOLD), test)["error"]  # '.' tagged XX is a word
    assert evalb_sentence(parse_tree(GOLD), with_tags(test, parse_tree(GOLD)))["exact"]

# ---------------------------------------------------------------- EVALB against the reference C program
def _evalb_check():  # tools/evalb_check.py: compiles tests/evalb_c/evalb.c and compares both scorers file against file
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("evalb_check", Path(__file__).resolve().parents[1] / "tools" / "evalb_check.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

EVALB_LABELS = ("NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP", "PRT", "NP-SBJ", "PP-LOC=2", "S-TPC-1", "-NONE-", "TOP", ":", "X")

def perturbed(tree: Tree, rng: random.Random) -> Tree:
    "A test tree for the comparison: relabelled brackets (function tags, ADVP/PRT, deleted labels), flattened, added and unary"
    " brackets, -NONE- elements and some wrong tags (punctuation among them)."
    def go(t):
        if t.is_preterminal():
            r = rng.random()
            if r < 0.03: return [Tree("-NONE-", ["*T*-1"]), Tree(t.label, list(t.children))]  # an empty element before the word
            if r < 0.04: return [Tree(rng.choice([",", ".", "NN", "-NONE-"]), list(t.children))]  # a wrong tag
            return [Tree(t.label, list(t.children))]
        kids = [k for c in t.children for k in go(c)]
        r = rng.random()
        if r < 0.15 and t.label != "TOP": return kids  # the bracket is gone
        label = rng.choice(EVALB_LABELS) if r < 0.35 else t.label
        if len(kids) > 2 and rng.random() < 0.2:  # a new bracket over two neighbours
            i = rng.randrange(len(kids) - 1); kids = kids[:i] + [Tree(rng.choice(EVALB_LABELS), kids[i:i + 2])] + kids[i + 2:]
        node = Tree(label, kids)
        return [Tree(rng.choice(EVALB_LABELS), [node]) if rng.random() < 0.1 else node]  # sometimes a unary above
    return go(tree)[0]

def test_evalb_equals_the_c_program(tmp_path, shared_data):
    "The Python scorer against EVALB's own evalb.c (tests/evalb_c, public domain), compiled here: the same counts, sentence by sentence."
    check = _evalb_check()
    try: binary = check.build(tmp_path)
    except FileNotFoundError as e: pytest.skip(str(e))
    src = check.EVALB_C
    r = check.compare("sample", binary, src / "COLLINS.prm", src / "sample" / "sample.gld", src / "sample" / "sample.tst")
    # EVALB's sample exercises its error cases; the one difference is line 8, four trees without a root: the C program scores it
    # as a sentence without brackets, parse_tree refuses it (at-parse never writes such a line)
    assert r["sentences"] == 24 and r["sentences_that_differ"] == 1 and r["first_differences"][0]["sentence"] == 8
    golds = [parse_tree(GOLD)] * 60
    try: golds += sample_trees("dev", shared_data)  # real trees where ../shared/data is present
    except (FileNotFoundError, OSError): pass
    rng = random.Random(0)
    (tmp_path / "gold").write_text("".join(f"{g}\n" for g in golds))
    (tmp_path / "test").write_text("".join(f"{perturbed(g, rng)}\n" for g in golds))
    r = check.compare("perturbed", binary, src / "COLLINS.prm", tmp_path / "gold", tmp_path / "test")
    assert r["sentences_that_differ"] == 0, r["first_differences"]
    assert r["totals"]["all"]["c"] == r["totals"]["all"]["python"]
    assert 0 < r["scored_c"] < r["sentences"] and r["totals"]["all"]["c"]["f1"] < 90  # errors and scored sentences, far from perfect

# ---------------------------------------------------------------- linearization and repair
def test_linearize():
    assert " ".join(linearize(parse_tree(GOLD))) == "(S (NP XX XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP XX )S"

def test_roundtrip():
    t = parse_tree(GOLD)
    back, rep = delinearize(linearize(t), t.words())
    assert rep == {} and str(with_tags(back, t)) == GOLD

W = "The cat sat on the mat .".split()
def wellformed(tree, words):
    t = parse_tree(str(tree))  # prints and reads back
    assert t.label == "TOP" and len(t.children) == 1 and not t.children[0].is_preterminal() and t.words() == words
    return t

def test_repair_unmatched_closer_dropped():
    t, rep = delinearize("(S XX XX )NP )S )S XX XX XX XX XX".split(), W)
    wellformed(t, W); assert rep["unmatched closing bracket dropped"] == 2 and rep["top level wrapped in (S"] == 1
    assert str(t).startswith("(TOP (S (S (XX The) (XX cat)) (XX sat)")

def test_repair_open_brackets_closed_at_end():
    t, rep = delinearize("(S (NP XX XX )NP (VP XX (PP XX (NP XX XX".split(), W)
    wellformed(t, W); assert rep["open bracket closed at the end"] == 4 and rep["missing XX added"] == 1
    assert str(t) == "(TOP (S (NP (XX The) (XX cat)) (VP (XX sat) (PP (XX on) (NP (XX the) (XX mat)))) (XX .)))"

def test_repair_too_many_xx():
    t, rep = delinearize("(S (NP XX XX )NP (VP XX XX XX XX XX (NP XX XX )NP )VP )S".split(), W)
    wellformed(t, W); assert rep == {"extra XX dropped": 2}
    assert str(t) == "(TOP (S (NP (XX The) (XX cat)) (VP (XX sat) (XX on) (XX the) (XX mat) (XX .))))"  # emptied NP pruned

def test_repair_too_few_xx():
    t, rep = delinearize("(S (NP XX )NP XX )S".split(), W)
    wellformed(t, W); assert rep == {"missing XX added": 5}
    assert str(t) == "(TOP (S (NP (XX The)) (XX cat) (XX sat) (XX on) (XX the) (XX mat) (XX .)))"

def test_repair_empty_output_is_flat():
    t, rep = delinearize([], W)
    assert str(wellformed(t, W)) == "(TOP (S " + " ".join(f"(XX {w})" for w in W) + "))"

def test_repair_label_mismatch_and_junk():
    t, rep = delinearize("(S (NP XX XX )VP <unk> (VP XX XX XX XX XX )VP )S".split(), W)
    wellformed(t, W); assert rep == {"closing label differs (kept the opening one)": 1, "other token dropped": 1}

def test_repair_two_top_constituents_wrapped():
    t, rep = delinearize("(NP XX XX )NP (VP XX XX XX XX XX )VP".split(), W)
    wellformed(t, W); assert rep == {"top level wrapped in (S": 1}

# ---------------------------------------------------------------- reading trees, bad input
def test_malformed_tree_names_file_and_line(tmp_path):
    f = tmp_path / "bad.clean"
    f.write_text(GOLD + "\n" + GOLD + "\n" + GOLD[:-1] + "\n")
    with pytest.raises(TreeError, match=r"bad\.clean, line 3: the tree starting here is not closed"): read_trees(f)
    f.write_text(GOLD + "\n" + GOLD + ")\n")
    with pytest.raises(TreeError, match=r"bad\.clean, line 2: '\)' without a matching '\('"): read_trees(f)
    f.write_text(GOLD + "\n(S (NP (DT a) dog))\n")
    with pytest.raises(TreeError, match=r"line 2: \(NP \.\.\.\) mixes a word"): read_trees(f)

def test_mrg_multiline_gz(tmp_path):
    text = "\n( (S \n    (NP-SBJ (DT The) (NN cat) )\n    (VP (VBD sat) (NP (-NONE- *T*-1) ))\n    (. .) ))\n( (S (NP (PRP It)) (VP (VBD ran) ) (. .) )) \n"
    f = tmp_path / "x.mrg.gz"; f.write_bytes(gzip.compress(text.encode()))
    trees = read_trees(f)
    assert [str(t) for t in trees] == ["(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))",
                                       "(TOP (S (NP (PRP It)) (VP (VBD ran)) (. .)))"]
    f.write_bytes(gzip.compress((text + "( (S (NP (PRP It)) \n (VP (VBD ran) )\n").encode()))
    with pytest.raises(TreeError, match=r"x\.mrg\.gz, line 7"): read_trees(f)

def test_shared_ptb(shared_data):
    dev = ptb_trees("dev", shared_data)
    assert len(dev) == 1700 and sum(len(t.words()) for t in dev) == 40117  # MANIFEST: 1700 trees, 40,117 tokens
    mrg = read_trees(shared_data / "ptb" / "wsj_22.mrg.gz")  # the same conversion as the .clean file
    assert [str(t) for t in mrg] == [str(t) for t in dev]
    assert len(sample_trees("train", shared_data)) + len(sample_trees("dev", shared_data)) == 3914

# ---------------------------------------------------------------- at-parse end to end on a tiny model
N = "dog cat man park idea bird tree car".split(); V = "saw liked found took".split(); D = "the a this".split()
I = "slept ran".split()  # intransitive: the tree's shape depends on the verb
def toy_tree(rng):
    np = lambda: f"(NP (DT {rng.choice(D)}) (NN {rng.choice(N)}))"
    vp = f"(VP (VBD {rng.choice(V)}) {np()})" if rng.random() < 0.5 else f"(VP (VBD {rng.choice(I)}))"
    return parse_tree(f"(TOP (S {np()} {vp} (. .)))")

@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    rng, run = random.Random(0), tmp_path_factory.mktemp("ptb") / "run"
    trees = [toy_tree(rng) for _ in range(300)]
    seed_everything(0)
    vocab = ParsingVocab.build(trees, vocab_size=300)
    cfg = TransformerConfig.tiny(src_vocab_size=vocab.src_vocab_size, tgt_vocab_size=vocab.tgt_vocab_size,
                                 tie_embeddings=False, max_len=128, norm_first=True)
    tcfg = TrainConfig(max_steps=300, warmup_steps=60, max_tokens=800, log_every=30, eval_every=0, save_every=0,
                         run_dir=str(run), progress=False, device="cpu")
    pairs, _ = encode_trees(trees, vocab, cfg.max_len)
    Trainer(make_model(cfg), tcfg, make_loader(pairs, tcfg.max_tokens, seed=0), tokenizer=vocab).fit()
    return run, [toy_tree(rng) for _ in range(20)]

def test_at_parse_end_to_end(tiny_checkpoint, tmp_path, capsys):
    run, golds = tiny_checkpoint
    model, vocab = load_model(run, "at-parse")
    res = parse(model, vocab, [g.words() for g in golds], beam_size=4)
    assert evalb(golds, [with_tags(t, g) for (t, _), g in zip(res, golds)])["all"]["f1"] > 95  # the toy grammar is learnt
    assert {len(g.words()) for g in golds} == {4, 6}  # both shapes are in the test set
    inp = tmp_path / "in.txt"
    mangled = "park park the the the . . idea saw saw saw a a a dog dog cat".split()  # not a sentence of the toy grammar
    inp.write_text(" ".join(golds[0].words()) + "\n" + " ".join(mangled) + "\n")
    assert parse_main(["--checkpoint", str(run), "--input", str(inp), "--beam", "3"]) == 0
    out = capsys.readouterr().out.split("\n")
    assert len(out) == 3 and out[2] == ""
    assert parse_tree(out[0]).words() == golds[0].words()
    wellformed(parse_tree(out[1]), mangled)  # still one well-formed tree over exactly these words
    (_, rep), = parse(model, vocab, [mangled], beam_size=3)
    assert rep == {}  # under TreeConstraint: built as decoded, nothing repaired
    assert parse_main(["--checkpoint", str(run), "--input", str(inp), "--beam", "1"]) == 0

def test_at_parse_greedy_gold_and_errors(tiny_checkpoint, tmp_path, cli):
    run, golds = tiny_checkpoint
    gold = tmp_path / "gold.clean"; gold.write_text("".join(str(g) + "\n" for g in golds))
    r = cli(parse_main, "--checkpoint", run, "--gold", gold, "--beam", "1")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 20 and "EVALB (COLLINS.prm)" in r.stderr
    r = cli(parse_main, "--checkpoint", tmp_path / "none")
    assert r.returncode == 1 and "at-parse: error:" in r.stderr
    # an ensemble takes chart parsers only: two sequence-to-sequence checkpoints are refused in one line that names one
    r = cli(parse_main, "--checkpoint", run, run, "--gold", gold)
    assert r.returncode == 1 and "a sequence-to-sequence parser; an ensemble takes chart parsers" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""

def test_train_main_ptb_sample(shared_data, tmp_path, capfd):  # the at-train path: presets, vocabularies, checkpoint contents
    from conftest import assert_closing_lines
    run = tmp_path / "run"
    rc = train_main(["ptb-sample", "--max_steps", "2", "--eval_every", "0", "--save_every", "0", "--run_dir", str(run),
                     "--no-progress", "--data_dir", str(shared_data), "--n_valid", "20", "--device", "cpu",
                     "--d_model", "32", "--d_ff", "64", "--n_layers", "1"])
    assert rc == 0
    out = capfd.readouterr().out
    assert_closing_lines(out)
    assert "validation loss " in out.splitlines()[-2]  # the final validation, in words
    model, vocab = load_model(run, "at-parse")
    assert vocab.src_vocab_size == 2000 and not model.cfg.tie_embeddings and model.cfg.tgt_vocab_size == vocab.tgt_vocab_size
    ck = load_checkpoint(run)
    assert ck.step == 2 and ck.counts["train_trees"] == 3669 and ck.data_spec["recipe"] == "ptb-sample" and ck.kind == "seq2seq-parser"
    assert train_main(["ptb-sample", "--run_dir", str(run / "x"), "--data_dir", str(tmp_path), "--no-progress"]) == 1  # no data: clear error

@pytest.mark.slow  # two fresh processes building the sample's vocabulary: about half a minute on 2 cores
def test_ptb_sample_under_torchrun_with_two_gloo_ranks(shared_data, tmp_path):
    "`torchrun -m annotated_transformer.commands.cli ptb-sample` on 2 CPU processes (gloo): each rank builds its shard, they train in step, rank 0 saves."
    import os
    from pathlib import Path
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "annotated_transformer.commands.cli",
           "ptb-sample", "--max-steps", "2", "--eval-every", "0", "--save-every", "0", "--run-dir", str(run), "--no-progress",
           "--data-dir", str(shared_data), "--n-valid", "20", "--device", "cpu", "--precision", "fp32",
           "--d-model", "32", "--d-ff", "64", "--n-layers", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ck = load_checkpoint(run)
    assert (ck.step, ck.world_size) == (2, 2) and ck.counts["train_trees"] == 3669
    model, vocab = load_model(run, "at-parse")
    assert vocab.src_vocab_size == 2000 and model.cfg.tgt_vocab_size == vocab.tgt_vocab_size

def random_sentences(n, rng, words="the a dog cat saw liked park idea . ,".split()):
    return [[rng.choice(words) for _ in range(rng.randint(1, 12))] for _ in range(n)]

def test_at_parse_takes_a_directory_holding_one_checkpoint_file(tiny_checkpoint, tmp_path, cli):
    "A model shared as DIR/checkpoint.pt (as ../shared/models/ptb-small-h100 is): the directory is accepted; two .pt files are named."
    import shutil
    run, golds = tiny_checkpoint
    shared = tmp_path / "shared-model"; shared.mkdir()
    shutil.copy(sorted(run.glob("ckpt_*.pt"))[-1], shared / "checkpoint.pt")
    words = " ".join(golds[0].words()) + "\n"
    by_dir, by_file = (cli(parse_main, "--checkpoint", c, "--beam", "1", stdin=words) for c in (shared, shared / "checkpoint.pt"))
    assert by_dir.returncode == 0, by_dir.stderr
    assert by_dir.stdout == by_file.stdout and parse_tree(by_dir.stdout.strip()).words() == golds[0].words()
    shutil.copy(shared / "checkpoint.pt", shared / "other.pt")
    r = cli(parse_main, "--checkpoint", shared, "--beam", "1", stdin=words)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "checkpoint.pt, other.pt" in r.stderr and "pass the one to use" in r.stderr
    empty = tmp_path / "empty"; empty.mkdir()
    r = cli(parse_main, "--checkpoint", empty, stdin=words)
    assert r.returncode == 1 and "no checkpoint in this directory" in r.stderr

def test_tree_constraint_untrained_model(tiny_checkpoint):
    "Random weights: without the constraint most outputs need repair; with it none does, greedy or beam, and the tree is the output."
    run, _ = tiny_checkpoint
    _, vocab = load_model(run, "at-parse")
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(src_vocab_size=vocab.src_vocab_size, tgt_vocab_size=vocab.tgt_vocab_size,
                                              tie_embeddings=False, max_len=128)).eval()
    sents = random_sentences(24, random.Random(1))
    free = parse(model, vocab, sents, beam_size=1, max_len_b=40, constrained=False)
    assert sum(bool(r) for _, r in free) >= 12  # the check can fail: an untrained decoder writes broken trees
    for beam in (1, 5):
        for (tree, rep), words in zip(parse(model, vocab, sents, beam_size=beam, max_len_b=40), sents):
            assert rep == {}, (beam, words, rep)
            wellformed(tree, words)

def test_tree_constraint_limit_too_small_falls_back_to_repair(tiny_checkpoint):
    run, _ = tiny_checkpoint
    model, vocab = load_model(run, "at-parse")
    words = "the dog saw a cat .".split()  # the shortest tree needs 6 XX + 2 brackets + EOS = 9 tokens
    for beam in (1, 3):
        (tree, rep), = parse(model, vocab, [words], beam_size=beam, max_len_a=0.0, max_len_b=5)
        wellformed(tree, words)
        assert rep  # the limit cut the output: the repair step finished the tree, and says so

def test_evaluate_decoding_resumes(tiny_checkpoint, tmp_path):
    run, golds = tiny_checkpoint
    out = tmp_path / "d.json"
    settings = [dict(name="g", beam_size=1), dict(name="b", beam_size=3, n=10)]
    r = evaluate_decoding(run, golds, out, settings[:1])
    assert [x["name"] for x in r["runs"]] == ["g"] and r["runs"][0]["n_sentences"] == 20
    r = evaluate_decoding(run, golds, out, settings)  # "g" is in the file already: only "b" runs
    assert [x["name"] for x in r["runs"]] == ["g", "b"] and r["runs"][1]["n_sentences"] == 10
    assert r["runs"][0]["scores"]["all"]["f1"] > 95 and r["runs"][1]["repaired"] == 0

def _bad_inputs(tmp_path, run):
    real = load_checkpoint(run)
    ck = tmp_path / "ck"; ck.mkdir()
    raw = (run / (run / "latest").read_text().strip()).read_bytes()
    (ck / "truncated.pt").write_bytes(raw[: len(raw) // 3])
    from annotated_transformer.engine.checkpoint import write_checkpoint
    import dataclasses
    write_checkpoint(dataclasses.replace(real, kind="transformer", tokenizer=dict(kind="bpe")), ck / "translation.pt")  # a well-formed checkpoint of another kind
    torch.save([1, 2, 3], ck / "list.pt")
    (ck / "text.pt").write_text("not a checkpoint\n")
    (ck / "empty_run").mkdir()
    def f(name, data):
        (tmp_path / name).write_bytes(data); return str(tmp_path / name)
    good = f("good.txt", b"the dog saw a cat .\n")
    gold = f("gold.clean", b"(TOP (S (NP (DT the) (NN dog)) (VP (VBD slept)) (. .)))\n")
    c = str(run)
    return [  # (arguments, what the one-line message must contain)
        (["--checkpoint", str(tmp_path / "missing"), "--input", good], "checkpoint not found"),
        (["--checkpoint", str(ck / "empty_run"), "--input", good], "no checkpoint in"),
        (["--checkpoint", str(ck / "truncated.pt"), "--input", good], "not a readable checkpoint"),
        (["--checkpoint", str(ck / "text.pt"), "--input", good], "not a readable checkpoint"),
        (["--checkpoint", str(ck / "list.pt"), "--input", good], "not a checkpoint of this package"),
        (["--checkpoint", str(ck / "translation.pt"), "--input", good], "holds a transformer model (text), which at-parse does not serve; use at-translate"),
        (["--checkpoint", c, "--input", str(tmp_path / "missing.txt")], "missing.txt"),
        (["--checkpoint", c, "--input", str(tmp_path)], "is a directory"),
        (["--checkpoint", c, "--input", f("latin1.txt", b"the dog .\ncaf\xe9 .\n")], "line 2: invalid UTF-8"),
        (["--checkpoint", c, "--input", f("long.txt", b"the dog .\n" + b"dog " * 200 + b"\n")], "line 2: 200 words"),
        (["--checkpoint", c, "--gold", f("empty.clean", b"")], "no trees"),
        (["--checkpoint", c, "--gold", f("bad.clean", b"(TOP (S (NP (DT the)\n")], "not closed"),
        (["--checkpoint", c, "--gold", f("latin1.clean", b"(TOP (S (NN caf\xe9)))\n")], "invalid UTF-8"),
        (["--checkpoint", c, "--gold", gold, "--input", good, "--beam", "0"], "--beam"),
        (["--checkpoint", c, "--input", good, "--beam", "two"], "--beam"),
        (["--checkpoint", c, "--input", good, "--alpha", "nan"], "--alpha"),
        (["--checkpoint", c, "--input", good, "--alpha", "-1"], "--alpha"),
        (["--checkpoint", c, "--input", good, "--batch-size", "0"], "--batch-size"),
        (["--checkpoint", c, "--input", good, "--max-len-b", "-5"], "--max-len-b"),
        (["--checkpoint", c, "--input", good, "--output", str(tmp_path / "no" / "such" / "dir.txt")], "--output"),
        (["--checkpoint", c, "--input", good, "--output", str(tmp_path)], "--output"),
    ]

def test_at_parse_bad_inputs(tiny_checkpoint, tmp_path, capsys):
    "Every bad input: non-zero exit, one line on stderr naming what is wrong, no traceback, no output file."
    run, _ = tiny_checkpoint
    for args, expect in _bad_inputs(tmp_path, run):
        out = tmp_path / "out.trees"
        try: rc = parse_main(args + (["--output", str(out)] if "--output" not in args else []))
        except SystemExit as e: rc = e.code  # argparse: exit 2 with a usage line
        err = capsys.readouterr().err.strip().splitlines()
        assert rc not in (0, None), args
        assert expect in err[-1] and "Traceback" not in "\n".join(err), (args, err)
        assert len([l for l in err if not l.startswith("usage:") and not l.startswith(" ")]) == 1, err
        assert not out.exists() and not (tmp_path / "out.trees.tmp").exists(), args

@pytest.mark.slow  # two fresh interpreters; the quick set runs parse_main in-process and one at-parse console row (test_bad_input)
def test_at_parse_console_script_exit_code(tiny_checkpoint, tmp_path):
    run, _ = tiny_checkpoint
    bad = tmp_path / "latin1.txt"; bad.write_bytes(b"a dog .\ncaf\xe9 .\n")
    r = subprocess.run(["at-parse", "--checkpoint", str(run), "--input", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "line 2: invalid UTF-8" in r.stderr, r.stderr
    good = tmp_path / "good.txt"; good.write_text("a dog slept .\n")
    r = subprocess.run(["at-parse", "--checkpoint", str(run), "--input", str(good), "--beam", "2"], capture_output=True, text=True)
    assert r.returncode == 0 and "1 sentence parsed, 0 repaired" in r.stderr and r.stdout.count("(TOP") == 1, r.stderr

def test_plot_tree_leaves_do_not_overlap():
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from annotated_transformer.parsing.trees import plot_tree
    t = parse_tree("(TOP (S (NP (NNP Intercontinental) (NNPS Telecommunications) (NNP Corp.)) (VP (VBD underperformed) "
                   "(NP (NNS expectations)) (PP (IN in) (NP (DT the) (NN quarter)))) (. .)))")
    ax = plot_tree(t)
    fig = ax.figure; fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = sorted((txt.get_window_extent(r) for txt in ax.texts if txt.get_color() == "tab:blue"), key=lambda b: b.x0)  # the words
    assert len(boxes) == len(t.words())
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), [(round(a.x1), round(b.x0)) for a, b in zip(boxes, boxes[1:])]
    plt.close(fig)
    # on axes the caller sized (two trees stacked in a 7-inch figure, as 19_parser draws them): the font shrinks to fit
    long = parse_tree("(TOP (S (NP (NP (DT The) (VBN complicated) (NN language)) (PP (IN in) (NP (DT the) (JJ huge) (JJ new) "
                      "(NN law)))) (VP (VBZ has) (VP (VBN muddied) (NP (DT the) (NN fight)))) (. .)))")
    fig, axs = plt.subplots(2, 1, figsize=(5, 6))
    for ax in axs:
        plot_tree(long, ax)
        fig.canvas.draw(); r = fig.canvas.get_renderer()
        boxes = sorted((txt.get_window_extent(r) for txt in ax.texts if txt.get_color() == "tab:blue"), key=lambda b: b.x0)
        assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), [(round(a.x1), round(b.x0)) for a, b in zip(boxes, boxes[1:])]
    plt.close(fig)

def test_at_evaluate_on_a_parser_run_names_its_kind_and_the_command_that_fits(tiny_checkpoint, tmp_path, cli):
    "at-evaluate scores translation runs: pointed at a parser's run it says what the run holds and which command serves it (it said '--average 5: ... keeps 2 checkpoints')."
    from annotated_transformer.commands.cli import evaluate_main
    run, _ = tiny_checkpoint
    r = cli(evaluate_main, str(run), "--test", "test", "--out", str(tmp_path / "res"))
    assert r.returncode == 1 and not (tmp_path / "res").exists(), r.stderr
    assert "holds a seq2seq-parser model (words" in r.stderr and "which at-evaluate does not serve; use at-parse" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
