"""The chart parser's auxiliary tagger (ChartConfig.tag_loss, issue 62's POS lever): it trains with the parser through the
package's Trainer, names the preterminals when parsing, round-trips through the vocabulary and checkpoints, refuses bad
settings in one line, and leaves a parser without it exactly as before."""
import tempfile
import pytest
import torch
from pathlib import Path
from annotated_transformer.parsing.chart import ChartConfig, ChartParser, ChartObjective, chart_parse
from annotated_transformer.parsing.chart_vocab import ChartVocab, chart_batch, chart_loader
from annotated_transformer.engine.config import TrainConfig
from annotated_transformer.engine.train import Trainer, seed_everything
from annotated_transformer.parsing.trees import parse_tree

TREES = [parse_tree(s) for s in [
    "(TOP (S (NP (PRP She)) (VP (VBD saw) (NP (NNS stars))) (. .)))",
    "(TOP (S (NP (DT The) (NN dog)) (VP (VBD slept)) (. .)))",
    "(TOP (S (NP (PRP He)) (VP (VBD ate) (NP (DT an) (NN apple)) (PP (IN in) (NP (DT the) (NN park)))) (. .)))",
    "(TOP (S (VP (VB Go) (ADVP (RB home)))))",
] * 3]
SMALL = dict(n_layers=1, d_model=32, n_heads=4, d_ff=64, d_label=32, dropout=0.0, loss="span")


def test_vocab_keeps_the_training_tags_and_old_vocabularies_load_without():
    v = ChartVocab.from_trees(TREES)
    assert v.tags == sorted({g for t in TREES for g in t.tags()})
    assert ChartVocab.from_state_dict(v.state_dict()).tags == v.tags
    old = {k: x for k, x in v.state_dict().items() if k != "tags"}  # a vocabulary saved before the tagger
    assert ChartVocab.from_state_dict(old).tags == [] and v.sized(ChartConfig()).n_tags == len(v.tags)


def test_gold_tags_are_ids_with_padding_and_unseen_tags_ignored():
    v = ChartVocab.from_trees(TREES)
    odd = parse_tree("(TOP (S (NP (NNP Kim)) (VP (VBD slept))))")  # NNP is not a training tag
    b = chart_batch(v, [TREES[0].words(), odd.words()], [TREES[0], odd])
    assert b.gold_tags.tolist() == [[v.tag_id[g] for g in TREES[0].tags()], [-100, v.tag_id["VBD"], -100, -100]]


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"tag_loss=-1.0: expected a weight >= 0"): ChartConfig(tag_loss=-1.0)
    with pytest.raises(ValueError, match=r"expected n_tags >= 1"): ChartParser(ChartConfig(n_words=9, n_chars=9, n_labels=3, tag_loss=5.0, **SMALL))
    with pytest.raises(ValueError, match=r"tag_loss=-2: expected a weight >= 0"): ChartObjective(ChartVocab.from_trees(TREES), "span", -2)
    m = ChartParser(ChartVocab.from_trees(TREES).sized(ChartConfig(**SMALL)))
    with pytest.raises(ValueError, match="no tagger head"): m.tag_scores(torch.zeros(1, 3, 32))


def test_without_the_tagger_a_parser_starts_from_the_same_numbers():
    v = ChartVocab.from_trees(TREES)
    torch.manual_seed(0); plain = ChartParser(v.sized(ChartConfig(**SMALL)))
    torch.manual_seed(0); tagged = ChartParser(v.sized(ChartConfig(tag_loss=5.0, **SMALL)))
    ps, pt = plain.state_dict(), tagged.state_dict()
    assert set(pt) - set(ps) and all(k.startswith("tag.") for k in set(pt) - set(ps))
    assert all(torch.equal(ps[k], pt[k]) for k in ps)  # the head is built last: it draws after every other weight


@pytest.mark.parametrize("loss", ["span", "margin"])
def test_the_tagger_trains_with_the_parser_and_names_the_preterminals(loss):
    v = ChartVocab.from_trees(TREES)
    seed_everything(0)
    m = ChartParser(v.sized(ChartConfig(**{**SMALL, "loss": loss}, tag_loss=5.0)))
    objective = ChartObjective(v, loss, 5.0)
    b = chart_batch(v, [t.words() for t in TREES[:4]], TREES[:4])
    m.eval()
    with torch.no_grad(): before = objective.loss(m, b) - ChartObjective(v, loss).loss(m, b)  # the tagger's share
    assert before > 0
    with tempfile.TemporaryDirectory() as d:
        cfg = TrainConfig(max_steps=60, warmup_steps=5, lr_factor=2.0, max_tokens=40, eval_every=30, log_every=30, save_every=30,
                          device="cpu", precision="fp32", run_dir=d, progress=False)
        Trainer(m, cfg, chart_loader(v, TREES, max_tokens=40), chart_loader(v, TREES[:4], shuffle=False), objective=objective,
                tokenizer=v).fit()
    m.eval()
    with torch.no_grad(): after = objective.loss(m, b) - ChartObjective(v, loss).loss(m, b)
    assert after < before / 10, (before, after)
    out = chart_parse(m, v, [t.words() for t in TREES[:4]])
    assert [t.tags() for t in out] == [t.tags() for t in TREES[:4]]  # predicted, not XX
    assert [t.tags() for t in chart_parse(m, v, [TREES[0].words()], tags=[["A"] * 4])] == [["A"] * 4]  # given tags win
    assert chart_parse([m, m], v, [TREES[0].words()])[0].tags() == TREES[0].tags()  # an ensemble of taggers tags too


def test_a_parser_without_the_tagger_still_writes_xx():
    v = ChartVocab.from_trees(TREES)
    torch.manual_seed(0)
    m = ChartParser(v.sized(ChartConfig(**SMALL)))
    assert chart_parse(m, v, [TREES[1].words()])[0].tags() == ["XX"] * 4
