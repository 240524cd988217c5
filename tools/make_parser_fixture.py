"""Write tests/fixtures/parser_cky.json: what the Python parser computes on small cases, for tests/js/parser.test.mjs to
check the in-page parser's JS (docs_src/_static/live/cky.js, parser.js) against.

    python tools/make_parser_fixture.py

- `charts`: hand-made and random span-score charts with the answers of `annotated_transformer.parsing.spans.cky` (labelled spans,
  the best score) and of `spans_to_tree` (the bracketed tree). Some charts hold small integers, so that many trees tie:
  the JS must break ties as torch's max does.
- `inputs`: the piece ids `chart_batch` gives the shipped parser (pretrained/ptb-chart) for a few sentences: the graph's
  input that parser.js must build from the same words.
No treebank text is in the file: the sentences are made up.
"""
import json
from pathlib import Path
import torch
from annotated_transformer.parsing.spans import EMPTY, cky, spans_to_tree
from annotated_transformer.parsing.chart_vocab import chart_batch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "parser_cky.json"
LABELS = [EMPTY, "NP", "VP", "S", "S+VP", "PP", "SBAR+S+VP"]  # unary chains of two and three labels
WORDS = "She saw the stars over the old harbour last night".split()
TAGS = "PRP VBD DT NNS IN DT JJ NN JJ NN".split()


def chart_case(name: str, scores: torch.Tensor, n: int, words: list[str] = WORDS, tags: list[str] = TAGS) -> dict:
    "One chart (n+1, n+1, L) for a sentence of n words, and what the Python parser makes of it."
    spans, best = cky(scores[None], torch.tensor([n]))
    labelled = [(i, j, LABELS[l]) for i, j, l in spans[0]]
    return dict(name=name, n=n, L=scores.size(-1), scores=scores.flatten().tolist(), spans=[list(s) for s in spans[0]],
                score=float(best[0]), words=words[:n], tags=tags[:n], labels=LABELS,
                bracketed=str(spans_to_tree(words[:n], tags[:n], labelled)))


def charts() -> list[dict]:
    out = []
    hand = torch.zeros(4, 4, len(LABELS))  # 19a_spans' worked example, "She saw stars": the best tree scores 8.5
    for (i, j), row in {(0, 1): (2.0, -1.0, -2.0), (1, 2): (-1.0, -0.5, -2.0), (2, 3): (1.5, -1.0, -2.0),
                        (0, 2): (-1.0, -2.0, 0.5), (1, 3): (-1.0, 2.0, 0.0), (0, 3): (-2.0, -1.0, 3.0)}.items():
        hand[i, j, 1:4] = torch.tensor(row)  # NP, VP, S; the other labels score 0
    out.append(chart_case("19a_spans, by hand", hand, 3, ["She", "saw", "stars"], ["PRP", "VBD", "NNS"]))
    g = torch.Generator().manual_seed(0)
    L = len(LABELS)
    for n in range(1, 11):  # random scores, the empty label 0, as the model's chart has it
        s = torch.randn(n + 1, n + 1, L, generator=g) * 3; s[..., 0] = 0
        out.append(chart_case(f"random, {n} words", s, n))
    for n in (2, 4, 6, 9):  # small integers: ties between labels and between split points
        s = torch.randint(-2, 3, (n + 1, n + 1, L), generator=g).float(); s[..., 0] = 0
        out.append(chart_case(f"ties, {n} words", s, n))
    s = torch.zeros(6, 6, L)  # every label scores 0: all ties; the root must still take a label other than the empty one
    out.append(chart_case("all zero, 5 words", s, 5))
    return out


def inputs() -> list[dict]:
    from annotated_transformer.engine.shipped_models import pretrained
    vocab = pretrained("ptb-chart").vocab
    sentences = [["Hi"], ".".split(), "The cat sat on the mat .".split(),
                 "Mr. O'Brien ca n't pay $ 1,000 -LRB- about 1\\/2 -RRB- , he said .".split(),
                 ["Zürich", "naïve", "北京", "😀", "x" * 60],  # characters unseen in training (bytes), a word of many pieces
                 "antidisestablishmentarianism supercalifragilisticexpialidocious".split()]
    return [dict(words=w, pieces=chart_batch(vocab, [w]).chars[0].tolist()) for w in sentences]


def main():
    data = dict(about="made by tools/make_parser_fixture.py from annotated_transformer.parsing.spans and chart_batch; do not edit",
                charts=charts(), inputs=inputs())
    OUT.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(data['charts'])} charts, {len(data['inputs'])} inputs, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
