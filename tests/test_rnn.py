"RNN encoder-decoder baseline (21_background): shapes, masks, scores, local-p, training, decoding, checkpoints."
import math
import pytest
import torch
import torch.nn as nn
from annotated_transformer.before.background import RNNConfig, CELLS, ATTENTIONS, make_rnn, lstm_cell, gru_cell, AdditiveAttention, DotAttention, GeneralAttention, LocalPAttention, align
from annotated_transformer.training.decode import greedy_decode, beam_search, hypotheses_to_tensor
from annotated_transformer.training.data import copy_task_pairs
from annotated_transformer.training.batching import collate
from annotated_transformer.engine.train import Trainer
from annotated_transformer.engine.config import TrainConfig
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.training.batching import make_loader
from annotated_transformer.engine.loading import load_model
from annotated_transformer.engine.kinds import kind_of
from annotated_transformer.commands.cli import parse_args


def tiny(**kw):
    torch.manual_seed(0)
    return make_rnn(RNNConfig.tiny(**kw)).eval()


def batch(B=3, S=7, T=5, V=16, pad_from=4):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (B, S), generator=g)
    mask = torch.zeros(B, S, dtype=torch.bool)
    mask[1, pad_from:] = True
    src[mask] = 0
    return src, mask, torch.randint(3, V, (B, T), generator=g)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_shapes_and_cache(cell, attention):
    m = tiny(cell=cell, attention=attention, n_layers=2)
    src, mask, tgt = batch()
    assert m(src, tgt, mask).shape == (3, 5, 16)
    memory = m.encode(src, mask)
    assert memory.shape == (3, 7, 64)
    full, attn = m.decode(tgt, memory, mask, need_weights=True)
    assert full.shape == (3, 5, 64) and attn.shape == (3, 5, 7)
    cache = m.init_cache()
    steps = torch.cat([m.decode(tgt[:, i:i + 1], memory, mask, cache=cache, offset=i) for i in range(5)], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_padding_gets_zero_weight_and_does_not_matter(attention):
    m = tiny(attention=attention)
    src, mask, tgt = batch(pad_from=4)
    _, attn = m.decode(tgt, m.encode(src, mask), mask, need_weights=True)
    assert (attn[1, :, 4:] == 0).all() and (attn[1, :, :4] > 0).any()
    # other ids in the padded positions change nothing (the packed encoder never reads them)
    src2 = src.clone(); src2[1, 4:] = 5
    torch.testing.assert_close(m(src2, tgt, mask)[1], m(src, tgt, mask)[1])
    # and the row equals the same sentence decoded alone, unpadded
    alone = m(src[1:2, :4], tgt[1:2])
    torch.testing.assert_close(m(src, tgt, mask)[1:2], alone, atol=1e-5, rtol=1e-5)


def test_cells_match_torch():
    torch.manual_seed(0)
    x, h, c = torch.randn(3, 5), torch.randn(3, 4), torch.randn(3, 4)
    lstm, gru = nn.LSTMCell(5, 4), nn.GRUCell(5, 4)
    for ours, ref in zip(lstm_cell(x, (h, c), lstm), lstm(x, (h, c))): torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(gru_cell(x, h, gru), gru(x, h))


def test_scores_by_hand():
    s = torch.tensor([[[1., 2.]]])  # (1, 1, 2)
    mem = torch.tensor([[[3., 0.], [1., 1.]]])  # (1, 2, 2)
    dot = DotAttention()
    torch.testing.assert_close(dot.score(s, dot.keys(mem)), torch.tensor([[[3., 3.]]]))
    gen = GeneralAttention(2)
    with torch.no_grad(): gen.w.weight.copy_(torch.tensor([[0., 1.], [2., 0.]]))  # W h: (3,0)->(0,6), (1,1)->(1,2)
    torch.testing.assert_close(gen.score(s, gen.keys(mem)), torch.tensor([[[12., 5.]]]))
    add = AdditiveAttention(2)
    with torch.no_grad():
        add.w_q.weight.copy_(torch.tensor([[1., 0.], [0., 0.]])); add.w_k.weight.copy_(torch.eye(2))
        add.w_k.bias.copy_(torch.tensor([0., 1.])); add.v.weight.copy_(torch.tensor([[2., -1.]]))
    # W_q s = (1, 0); W_k h + b = (3, 1), (1, 2): v . tanh((4, 1)), v . tanh((2, 2))
    want = torch.tensor([[[2 * math.tanh(4) - math.tanh(1), 2 * math.tanh(2) - math.tanh(2)]]])
    torch.testing.assert_close(add.score(s, add.keys(mem)), want)
    ctx, attn = align(torch.tensor([[[0., math.log(3.)]]]), mem)
    torch.testing.assert_close(attn, torch.tensor([[[0.25, 0.75]]]))
    torch.testing.assert_close(ctx, torch.tensor([[[1.5, 0.75]]]))


def test_local_p_window():
    torch.manual_seed(0)
    local = LocalPAttention(8, window=2)
    mem, q = torch.randn(2, 12, 8), torch.randn(2, 3, 8)
    pad = torch.zeros(2, 12, dtype=torch.bool); pad[1, 7:] = True
    _, w = local.align(q, local.keys(mem), mem, pad)
    p = local.position(q, torch.tensor([12., 7.]))  # (2, 3, 1)
    assert p.shape == (2, 3, 1) and (p >= 0).all() and (p[:, :, 0] <= torch.tensor([[12.], [7.]])).all()
    dist = (torch.arange(12) - p).abs()  # (2, 3, 12)
    assert (w[dist > 2] == 0).all() and (w[1, :, 7:] == 0).all()
    assert (w.sum(-1) > 0).all()  # never an empty window
    # inside the window: softmax of the general scores over the window, times the Gaussian
    scores = local.score(q, local.keys(mem)).masked_fill((dist > 2) | pad[:, None], float("-inf")).softmax(-1)
    torch.testing.assert_close(w, scores * torch.exp(-(torch.arange(12) - p) ** 2 / 2))  # sigma = 1
    with pytest.raises(ValueError, match="window"): RNNConfig(window=0)
    with pytest.raises(ValueError, match="attention"): RNNConfig(attention="scaled")


def copy_trained(steps=300, attention="bahdanau", cell="lstm"):
    torch.manual_seed(0)
    m = make_rnn(RNNConfig.tiny(src_vocab_size=11, tgt_vocab_size=11, attention=attention, cell=cell))
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    pairs = copy_task_pairs(steps * 64, vocab_size=11, max_len=8, seed=0)
    for i in range(steps):
        b = collate(pairs[i * 64:(i + 1) * 64])
        loss = nn.functional.cross_entropy(m(b.src, b.tgt_in, b.src_key_padding_mask).flatten(0, 1), b.tgt_out.flatten(), ignore_index=0)
        opt.zero_grad(); loss.backward(); nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    return m.eval(), loss.item()


def test_trains_on_copy_and_decodes():
    m, loss = copy_trained()
    assert loss < 0.3, loss
    pairs = copy_task_pairs(50, vocab_size=11, max_len=8, seed=99)
    b = collate(pairs)
    greedy = greedy_decode(m, b.src, b.src_key_padding_mask, max_len_b=2)
    torch.testing.assert_close(greedy, greedy_decode(m, b.src, b.src_key_padding_mask, max_len_b=2, use_cache=False))
    beam = hypotheses_to_tensor(beam_search(m, b.src, b.src_key_padding_mask, beam_size=4, max_len_b=2))
    for out in (greedy, beam):
        hits = sum(row[:row.index(2)] == s if 2 in row else False for row, (s, _) in zip(out.tolist(), pairs))
        assert hits >= 40, hits
    # beam search with and without the cache (reorder_cache moves the recurrent state with the beams) agree
    nocache = beam_search(m, b.src, b.src_key_padding_mask, beam_size=4, max_len_b=2, use_cache=False)
    cached = beam_search(m, b.src, b.src_key_padding_mask, beam_size=4, max_len_b=2)
    assert [h[0].tokens for h in nocache] == [h[0].tokens for h in cached]


def test_trainer_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    cfg = RNNConfig.tiny(src_vocab_size=11, tgt_vocab_size=11, attention="local-p", cell="gru", window=3)
    pairs = copy_task_pairs(200, vocab_size=11, max_len=8, seed=0)
    tcfg = TrainConfig(max_steps=3, warmup_steps=2, max_tokens=300, eval_every=0, save_every=0, log_every=1,
                         run_dir=str(tmp_path / "run"), progress=False, clip_norm=1.0, device="cpu")  # compared with CPU tensors below
    trainer = Trainer(make_rnn(cfg), tcfg, make_loader(pairs, 300, seed=0), make_loader(pairs[:50], 300, shuffle=False))
    trainer.fit()
    ck = tmp_path / "run" / "ckpt_0000003.pt"
    assert ck.is_file()
    rebuilt = load_checkpoint(ck).build()
    assert load_checkpoint(ck).kind == "rnn"
    assert type(rebuilt).__name__ == "RNNSeq2Seq" and rebuilt.cfg == cfg
    src, mask, tgt = batch(V=11)
    torch.testing.assert_close(rebuilt(src, tgt, mask), trainer.model.eval()(src, tgt, mask))
    assert kind_of(cfg).name == "rnn" and type(kind_of(cfg).build(cfg)).__name__ == "RNNSeq2Seq"


def test_translate_load_checkpoint(tmp_path):
    from dataclasses import asdict
    from annotated_transformer.training.data import SubwordTokenizer
    pytest.importorskip("sentencepiece")
    lines = [f"das ist satz nummer {i} und er ist kurz" for i in range(200)]
    tok = SubwordTokenizer.train(lines, vocab_size=30, byte_fallback=False)
    cfg = RNNConfig.tiny(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, attention="luong-general")
    m = make_rnn(cfg).eval()
    torch.save({"model": m.state_dict(), "model_config": asdict(cfg), "tokenizer": tok.state_dict()}, tmp_path / "ck.pt")
    loaded, tok2 = load_model(tmp_path / "ck.pt")
    src, mask, tgt = batch(V=tok.vocab_size)
    torch.testing.assert_close(loaded(src, tgt, mask), m(src, tgt, mask))
    torch.testing.assert_close(greedy_decode(loaded, src, mask), greedy_decode(m, src, mask))


def test_parse_args_model_choice():
    _, m, t, d = parse_args(["multi30k", "--model", "rnn", "--d_model", "96", "--rnn_attention", "luong-dot", "--rnn_cell", "gru"])
    assert isinstance(m, RNNConfig) and (m.d_model, m.attention, m.cell, m.n_layers, m.src_vocab_size) == (96, "luong-dot", "gru", 3, 8000)
    assert type(parse_args(["copy"])[1]).__name__ == "TransformerConfig"
    with pytest.raises(SystemExit): parse_args(["copy", "--model", "lstm"])
    with pytest.raises(SystemExit): parse_args(["copy", "--model", "rnn", "--rnn_attention", "scaled"])

def test_plot_alignment_without_axes():  # it made its own figure with a `plt` the module never imported
    import matplotlib; matplotlib.use("Agg")
    from annotated_transformer.before.background import plot_alignment
    ax = plot_alignment(torch.rand(3, 4), list("abcd"), list("xyz"))
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
