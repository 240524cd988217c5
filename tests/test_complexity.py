"Table 1 (§4): layer formulas and measured path lengths."
import math, pytest, torch
from annotated_transformer.architecture.why_self_attention import layer_flops, make_layer, influence, layers_to_connect, RestrictedSelfAttention, SelfAttentionCore

def test_flops_crossover_at_n_equals_d():
    assert layer_flops("self-attention", 256, 256) == layer_flops("recurrent", 256, 256)
    assert layer_flops("self-attention", 255, 256) < layer_flops("recurrent", 255, 256)
    with pytest.raises(ValueError, match="expected one of"): layer_flops("gru", 1, 1)

def test_restricted_attention_is_local_and_exact():
    x = torch.randn(2, 20, 8)
    torch.testing.assert_close(RestrictedSelfAttention(39)(x), SelfAttentionCore()(x), atol=1e-5, rtol=1e-5)
    m = influence([make_layer("restricted", 4, r=5).double()], 12, 4)
    assert m[6].nonzero().flatten().tolist() == [4, 5, 6, 7, 8]  # window of 5 centred on 6

@pytest.mark.parametrize("kind,kw,expected", [
    ("self-attention", {}, 1), ("convolutional", dict(k=3), 9), ("convolutional", dict(k=3, dilated=True), 3),
    ("restricted", dict(r=4), 9)])  # r=4: 2 back, 1 forward per layer -> 9 layers for 10 positions
def test_path_lengths(kind, kw, expected):
    assert layers_to_connect(kind, 10, **kw) == expected  # dilated: 1+3+9 = 13 >= 9 after 3 layers

def test_recurrent_is_causal_chain():
    m = influence([make_layer("recurrent", 3).double()], 8, 3)
    assert torch.equal(m, torch.ones(8, 8, dtype=torch.bool).tril())
