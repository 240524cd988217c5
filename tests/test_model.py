"Foundation tests: parity with torch.nn, causality, padding invariance, gradients, tying, checkpoints, bad input."
import io, pytest, torch, torch.nn as nn
from dataclasses import asdict
from annotated_transformer.engine.config import TransformerConfig, config_from_dict
from annotated_transformer.architecture.attention import MultiHeadAttention, attention, causal_mask, padding_mask, merge_masks, copy_to_torch_mha
from annotated_transformer.architecture.layers import EncoderLayer, DecoderLayer, copy_to_torch_layer
from annotated_transformer.architecture.embeddings import PositionalEncoding
from annotated_transformer.architecture.model import make_model, count_parameters

torch.set_num_threads(1)

def tiny(**kw): return make_model(TransformerConfig.tiny(**kw))

# ---------------------------------------------------------------- parity with torch.nn (copied weights)
@pytest.mark.parametrize("fused", [True, False])
def test_mha_parity(fused):
    torch.manual_seed(0)
    ours = MultiHeadAttention(48, 6, fused=fused).eval()
    ref = nn.MultiheadAttention(48, 6, batch_first=True).eval()
    copy_to_torch_mha(ours, ref)
    q, kv = torch.randn(3, 5, 48), torch.randn(3, 9, 48)
    kpm = torch.zeros(3, 9, dtype=torch.bool); kpm[1, 6:] = True; kpm[2, 2:] = True
    got, _ = ours(q, kv, kv, key_padding_mask=kpm)
    want, _ = ref(q, kv, kv, key_padding_mask=kpm, need_weights=False)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_parity(norm_first):
    torch.manual_seed(1)
    D, H, F_ = 32, 4, 80
    src, tgt = torch.randn(2, 7, D), torch.randn(2, 6, D)
    skpm = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    tkpm = torch.tensor([[False] * 6, [False] * 5 + [True]])
    enc = EncoderLayer(D, H, F_, 0.0, norm_first).eval()
    ref = nn.TransformerEncoderLayer(D, H, F_, 0.0, batch_first=True, norm_first=norm_first).eval()
    copy_to_torch_layer(enc, ref)
    torch.testing.assert_close(enc(src, skpm), ref(src, src_key_padding_mask=skpm), atol=1e-5, rtol=1e-5)
    dec = DecoderLayer(D, H, F_, 0.0, norm_first).eval()
    ref = nn.TransformerDecoderLayer(D, H, F_, 0.0, batch_first=True, norm_first=norm_first).eval()
    copy_to_torch_layer(dec, ref)
    got = dec(tgt, src, tgt_key_padding_mask=tkpm, memory_key_padding_mask=skpm)
    want = ref(tgt, src, tgt_mask=causal_mask(6), tgt_key_padding_mask=tkpm, memory_key_padding_mask=skpm)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)

def test_layernorm_is_torchs():
    # we use nn.LayerNorm (not hand-written); the parity above covers its placement
    assert all(isinstance(m, nn.LayerNorm) for n, m in EncoderLayer(8, 2, 16).named_modules() if "norm" in n)

def test_fused_equals_explicit():
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    mask = merge_masks(torch.rand(4, 6) > 0.6, torch.tensor([[False] * 6, [False] * 3 + [True] * 3]), 2, 4, 6)
    ref, _ = attention(q, k, v, mask)
    got = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    assert not torch.isnan(ref).any()

# ---------------------------------------------------------------- model invariants
@pytest.mark.parametrize("norm_first", [False, True])
def test_causality(norm_first):
    torch.manual_seed(3)
    model = tiny(norm_first=norm_first).eval()
    src = torch.randint(3, 16, (2, 7)); tgt = torch.randint(3, 16, (2, 8))
    base = model(src, tgt)
    for t in range(8):
        changed = tgt.clone(); changed[:, t + 1:] = torch.randint(3, 16, changed[:, t + 1:].shape)
        out = model(src, changed)
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-5, rtol=1e-5)
    changed = tgt.clone(); changed[:, 4] = (changed[:, 4] + 1 - 3) % 13 + 3
    assert (model(src, changed)[:, 4:] - base[:, 4:]).abs().max() > 1e-4  # the test can fail

@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_padding_invariance(positional):
    torch.manual_seed(4)
    model = tiny(positional=positional).eval()
    src = torch.randint(3, 16, (2, 6)); tgt = torch.randint(3, 16, (2, 5))
    base = model(src, tgt, padding_mask(src, 0), padding_mask(tgt, 0))
    src_p = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], 1)
    tgt_p = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], 1)
    out = model(src_p, tgt_p, padding_mask(src_p, 0), padding_mask(tgt_p, 0))
    torch.testing.assert_close(out[:, :5], base, atol=1e-5, rtol=1e-5)
    unmasked = model(src_p, tgt_p)  # without the masks the padding leaks in: proves the masks matter
    assert (unmasked[:, :5] - base).abs().max() > 1e-4

def test_gradients_reach_every_parameter():
    torch.manual_seed(5)
    for kw in [dict(), dict(positional="learned", norm_first=True), dict(tie_embeddings=False)]:
        model = tiny(**kw).train()
        src = torch.randint(3, 16, (3, 6)); tgt = torch.randint(3, 16, (3, 5))
        nn.functional.cross_entropy(model(src, tgt).flatten(0, 1), torch.randint(3, 16, (15,))).backward()
        dead = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert dead == [], (kw, dead)

def test_tied_weights_are_one_tensor():
    model = tiny()
    w = model.generator.weight
    assert w is model.src_embed.lut.weight is model.tgt_embed.lut.weight
    assert w.data_ptr() == model.src_embed.lut.weight.data_ptr()
    n_tied = count_parameters(model)
    assert count_parameters(tiny(tie_embeddings=False)) == n_tied + 2 * 16 * 64 + 16
    # an optimizer step moves all three together
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randint(3, 16, (2, 4)), torch.randint(3, 16, (2, 4))).sum().backward(); opt.step()
    assert torch.equal(model.generator.weight, model.src_embed.lut.weight)
    # and survive a state_dict round trip
    clone = tiny(); clone.load_state_dict(model.state_dict())
    assert clone.generator.weight is clone.src_embed.lut.weight

def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(6)
    model = tiny(n_layers=3, positional="learned").eval()
    path = tmp_path / "model.pt"
    torch.save({"config": asdict(model.cfg), "model": model.state_dict()}, path)
    ckpt = torch.load(path, weights_only=True)
    rebuilt = make_model(config_from_dict(TransformerConfig, ckpt["config"])).eval()
    rebuilt.load_state_dict(ckpt["model"])
    src = torch.randint(3, 16, (2, 5)); tgt = torch.randint(3, 16, (2, 4))
    torch.testing.assert_close(rebuilt(src, tgt), model(src, tgt))
    assert rebuilt.cfg == model.cfg

def test_kv_cache_equals_full_decoder():
    torch.manual_seed(7)
    model = tiny(n_layers=2).eval()
    src = torch.randint(3, 16, (2, 6)); tgt = torch.randint(3, 16, (2, 7))
    memory = model.encode(src)
    full = model.decode(tgt, memory)
    cache = model.init_cache()
    steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, cache=cache, offset=t) for t in range(7)], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)

# ---------------------------------------------------------------- bad input
def test_d_model_not_divisible():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by n_heads=3"):
        TransformerConfig(d_model=100, n_heads=3)
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        MultiHeadAttention(10, 4)

def test_bad_masks():
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    with pytest.raises(TypeError, match="must be a bool tensor with True = blocked"):
        mha(x, x, x, key_padding_mask=torch.zeros(2, 5))
    with pytest.raises(TypeError, match="attn_mask must be a bool tensor"):
        mha(x, x, x, attn_mask=torch.zeros(5, 5))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(5, 2\); expected \(B, S\)"):
        mha(x, x, x, key_padding_mask=torch.zeros(5, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(4, 5\)"):
        mha(x, x, x, attn_mask=torch.zeros(4, 5, dtype=torch.bool))

def test_sequence_longer_than_positional_table():
    model = tiny(max_len=10)
    with pytest.raises(ValueError, match="exceeds the positional table's max_len=10"):
        model(torch.randint(3, 16, (1, 11)), torch.randint(3, 16, (1, 3)))
    with pytest.raises(ValueError, match="max_len=10"):
        PositionalEncoding(8, 10)(torch.zeros(1, 4, 8), offset=7)

def test_no_nan_with_fully_padded_row():
    model = tiny().eval()
    src = torch.tensor([[3, 4, 2], [0, 0, 0]])  # second source is all padding
    out = model(src, torch.tensor([[1, 3], [1, 4]]), padding_mask(src, 0))
    assert torch.isfinite(out).all()


def test_dropout_fast_path_is_dropout():
    "The CPU fast path of `Dropout` (02_layers): the kept share and unbiased mean of F.dropout, gradients only through what it keeps, one mask per seed."
    from annotated_transformer.architecture.attention import Dropout
    for p in (0.1, 0.3, 0.5):
        torch.manual_seed(0)
        x = torch.randn(400, 500, requires_grad=True)
        y = Dropout(p)(x)
        keep = y != 0
        k = round(p * 65536)
        assert abs(keep.float().mean().item() - (1 - k / 65536)) < 4e-3  # 6 standard deviations of 200,000 draws at p=0.1; a threshold 1% off fails
        torch.testing.assert_close(y[keep], x[keep] * (65536 / (65536 - k)))
        y.backward(torch.ones_like(y))
        torch.testing.assert_close(x.grad, keep.float() * (65536 / (65536 - k)))
    ones = torch.ones(1000, 1000)
    assert abs(Dropout(0.2)(ones).mean().item() - 1.0) < 3e-3  # unbiased: F.dropout's expectation
    torch.manual_seed(3); a = Dropout(0.2)(ones)
    torch.manual_seed(3); b = Dropout(0.2)(ones)
    assert torch.equal(a, b)
    # the 16-bit draws are uniform: every bit of every 16-bit lane is set half the time (a draw that left the top bit 0 would fail)
    torch.manual_seed(0)
    bits = torch.empty(250_000, dtype=torch.int64).random_(-2**63, 2**63 - 1).view(torch.int16).view(-1, 4).int() & 0xFFFF
    shares = torch.stack([((bits >> s) & 1).float().mean(0) for s in range(16)])
    assert (shares - 0.5).abs().max() < 0.01
    assert torch.equal(Dropout(0.2).eval()(ones), ones) and torch.equal(Dropout(0.0)(ones), ones)
    with pytest.raises(ValueError, match=r"p=1.0: expected a probability in \[0, 1\)"): Dropout(1.0)


def test_dropout_compiles_to_f_dropout():
    "Under torch.compile, `Dropout` is F.dropout (fused by inductor): the compiled model runs and keeps about 1-p of its input."
    from annotated_transformer.architecture.attention import Dropout
    f = torch.compile(Dropout(0.1), backend="eager")
    torch.manual_seed(0)
    y = f(torch.ones(300, 300))
    assert abs((y != 0).float().mean().item() - 0.9) < 0.01
    assert torch.equal(y[y != 0].unique(), torch.tensor([1 / 0.9]))  # F.dropout's scale; the fast path's is 65536 / 58982


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_dropout_on_cuda_is_f_dropout():
    from annotated_transformer.architecture.attention import Dropout
    x = torch.ones(100, 100, device="cuda")
    torch.manual_seed(0); a = Dropout(0.2)(x)
    torch.manual_seed(0); b = torch.nn.functional.dropout(x, 0.2, True)
    assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_attention_dropout_in_training_on_cpu_is_written_out(dtype):
    """Training on a CPU with dropout on the weights, `MultiHeadAttention` runs the written-out `attention` with the
    package's `Dropout` (SDPA has no CPU kernel with dropout): the same output and gradients as that, drawn from the same
    seed; the weights are returned only when asked for; in eval mode the fused kernel gives the same as written out."""
    from annotated_transformer.architecture.attention import Dropout
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=32, n_heads=4, dropout=0.3).train()
    x = torch.randn(3, 6, 32, requires_grad=True)
    kpm = torch.zeros(3, 6, dtype=torch.bool); kpm[1, 4:] = True
    ctx = torch.autocast("cpu", dtype=dtype) if dtype else torch.autocast("cpu", enabled=False)
    def written_out(x):
        B, T, _ = x.shape
        q, k, v = (mha.split_heads(p(x)) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        o, _ = attention(q, k, v, merge_masks(causal_mask(T), kpm, B, T, T), mha.dropout)
        return mha.out_proj(o.transpose(1, 2).reshape(B, T, -1))
    with ctx:
        torch.manual_seed(1); out, w = mha(x, x, x, key_padding_mask=kpm, is_causal=True)
        torch.manual_seed(1); want = written_out(x)
    assert w is None and isinstance(mha.dropout, Dropout)
    assert torch.equal(out, want)
    g, = torch.autograd.grad(out.float().sum(), x); g_want, = torch.autograd.grad(want.float().sum(), x)
    assert torch.equal(g, g_want)
    with ctx: torch.manual_seed(2); _, w = mha(x, x, x, key_padding_mask=kpm, need_weights=True)
    assert w.shape == (3, 4, 6, 6) and (w == 0).any()  # dropped out
    mha.eval()
    with torch.no_grad():
        fused, _ = mha(x, x, x, key_padding_mask=kpm, is_causal=True)
        mha.fused = False; plain, _ = mha(x, x, x, key_padding_mask=kpm, is_causal=True); mha.fused = True
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
