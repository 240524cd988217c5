"""The chart parser's faster step gives the numbers of the code it replaced (tools/chart_step_before_after.py keeps that code
to time it): in fp32 the same scores and loss, bit for bit, from the same random bits, and gradients equal to rounding; in bf16
the loss within bf16's rounding; and `Dropout` as one product is the select it replaced."""
import importlib.util, sys
from pathlib import Path
import pytest, torch
from annotated_transformer.architecture.attention import Dropout
from annotated_transformer.parsing.chart import ChartConfig, ChartParser, ChartObjective
from annotated_transformer.parsing.chart_vocab import ChartVocab, chart_batch
from annotated_transformer.parsing.trees import parse_tree

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location("_chart_step_before_after", ROOT / "tools" / "chart_step_before_after.py")
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    finally: sys.path.remove(str(ROOT / "tools"))
    return mod


@pytest.fixture(scope="module")
def parser_and_batch():
    trees = [parse_tree(s) for s in ("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))",
                                     "(S (NP (PRP it)) (VP (VBD ran) (ADVP (RB away))))",
                                     "(S (NP (NNS dogs)) (VP (VBP bark)))")]
    vocab = ChartVocab.from_trees(trees, min_count=1)
    cfg = ChartConfig(n_words=len(vocab.words), n_chars=len(vocab.chars), n_labels=len(vocab.labels), n_layers=2,
                      d_model=32, n_heads=4, d_ff=64, d_char=8, d_label=24, loss="span")
    torch.manual_seed(0)
    return ChartParser(cfg).train(), ChartObjective(vocab, "span"), chart_batch(vocab, [t.words() for t in trees], trees)


def _loss_and_grads(model, obj, b, seed, precision="fp32"):
    model.zero_grad()
    torch.manual_seed(seed)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"): s = obj.loss(model, b)
    s.backward()
    return s.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_scores_are_bit_identical_in_fp32(tool, parser_and_batch):
    m, _, b = parser_and_batch
    old = tool.before(m)
    for mode in ("eval", "train"):
        getattr(m, mode)(); getattr(old, mode)()
        torch.manual_seed(1); new_s = m.span_scores(b.words, b.chars, b.lengths)
        torch.manual_seed(1); old_s = old.span_scores(b.words, b.chars, b.lengths)
        assert torch.equal(new_s, old_s), mode  # the same random bits decide the same drops
    m.train()


def test_loss_and_gradients_match_the_code_replaced(tool, parser_and_batch):
    m, obj, b = parser_and_batch
    old = tool.before(m)
    s_new, g_new = _loss_and_grads(m, obj, b, 2)
    s_old, g_old = _loss_and_grads(old, obj, b, 2)
    assert torch.equal(s_new, s_old)
    assert g_new.keys() == g_old.keys()
    for k in g_new: torch.testing.assert_close(g_new[k], g_old[k], rtol=1e-5, atol=1e-6, msg=k)
    # bf16: the classifier's elementwise work now rounds to bf16 after the fp32 differences
    s16, _ = _loss_and_grads(m, obj, b, 2, "bf16")
    s16_old, _ = _loss_and_grads(old, obj, b, 2, "bf16")
    assert abs(s16.item() - s16_old.item()) <= 2e-2 * abs(s16_old.item()), (s16, s16_old)
    assert abs(s16.item() - s_new.item()) <= 2e-2 * abs(s_new.item()), (s16, s_new)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_as_one_product_is_the_select_it_replaced(tool, dtype):
    x = torch.randn(257, 33, dtype=dtype, requires_grad=True)
    torch.manual_seed(5); y = Dropout(0.1)(x); y.backward(torch.ones_like(y)); g = x.grad.clone(); x.grad = None
    torch.manual_seed(5); y_old = tool._DropoutBefore(0.1)(x); y_old.backward(torch.ones_like(y_old))
    assert torch.equal(y == 0, y_old == 0)  # the same elements dropped
    if dtype == torch.float32:  # the scale in fp32 either way: bit for bit
        assert torch.equal(y, y_old) and torch.equal(g, x.grad)
    else:  # the mask holds the scale rounded to bf16: one rounding of the scale apart
        torch.testing.assert_close(y, y_old, rtol=1e-2, atol=0); torch.testing.assert_close(g, x.grad, rtol=1e-2, atol=0)
