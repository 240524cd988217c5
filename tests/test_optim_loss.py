"Tests of the schedule of equation (3) (optim.py) and the label-smoothed loss (loss.py)."
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from annotated_transformer.engine.config import TrainConfig, TransformerConfig
from annotated_transformer.architecture.model import make_model
from annotated_transformer.training.loss import LabelSmoothingLoss, ChunkedLabelSmoothingLoss, label_smoothed_cross_entropy, chunked_label_smoothed_cross_entropy, smooth_targets
from annotated_transformer.training.optim import make_optimizer, make_optimizer_and_scheduler, make_scheduler, noam_lr, adam_impl, adam_kwargs, ADAM_IMPLS, cooldown


def equation_3(step, d_model, warmup):  # the paper's formula, typed in independently of noam_lr
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def run_schedule(d_model, warmup, n_steps, factor=1.0, seed=0):
    "Step a real Adam + LambdaLR n_steps times; return the lr each update ran with (update k at index k-1)."
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    opt = make_optimizer(model)
    sched = make_scheduler(opt, d_model, warmup, factor)
    used = []
    for _ in range(n_steps):
        used.append(opt.param_groups[0]["lr"])
        model(torch.randn(4, 3)).square().mean().backward()
        opt.step(); opt.zero_grad(); sched.step()
    return used


# ---------------------------------------------------------------- schedule

@pytest.mark.parametrize("d_model,warmup", [(512, 4000), (64, 7), (1024, 1)])
def test_noam_lr_is_equation_3(d_model, warmup):
    for step in [1, 2, warmup // 2 + 1, warmup, warmup + 1, 3 * warmup, 100_000]:
        assert math.isclose(noam_lr(step, d_model, warmup), equation_3(step, d_model, warmup), rel_tol=1e-12)
    assert math.isclose(noam_lr(10, d_model, warmup, factor=2.5), 2.5 * equation_3(10, d_model, warmup), rel_tol=1e-12)


def test_lambdalr_steps_equal_equation_3():
    d_model, warmup = 128, 12
    used = run_schedule(d_model, warmup, 40)
    for k in [1, 2, 5, 11, 12, 13, 25, 40]:  # the k-th optimizer update
        assert math.isclose(used[k - 1], equation_3(k, d_model, warmup), rel_tol=1e-12), k
    assert used[0] > 0  # no step 0


def test_lambdalr_factor_from_train_config():
    model = nn.Linear(3, 2)
    opt, sched = make_optimizer_and_scheduler(model, 256, TrainConfig(lr_factor=2.0, warmup_steps=5))
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    for k in range(1, 8):
        assert math.isclose(opt.param_groups[0]["lr"], 2.0 * equation_3(k, 256, 5), rel_tol=1e-12)
        opt.step(); sched.step()


@pytest.mark.parametrize("d_model,warmup", [(512, 4000), (256, 37), (1024, 1)])
def test_peak_at_warmup(d_model, warmup):
    lrs = [noam_lr(s, d_model, warmup) for s in range(1, 3 * warmup + 10)]
    assert lrs.index(max(lrs)) + 1 == warmup
    assert math.isclose(max(lrs), (d_model * warmup) ** -0.5, rel_tol=1e-12)


def test_peak_of_real_optimizer_at_warmup():
    used = run_schedule(64, 9, 30)
    assert used.index(max(used)) + 1 == 9


def test_scheduler_resume_continues_identically():
    d_model, warmup = 64, 6
    full = run_schedule(d_model, warmup, 20)
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = make_optimizer(model); sched = make_scheduler(opt, d_model, warmup)
    for _ in range(8):
        model(torch.randn(4, 3)).square().mean().backward(); opt.step(); opt.zero_grad(); sched.step()
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    opt2 = make_optimizer(model); sched2 = make_scheduler(opt2, d_model, warmup)  # as at the start
    opt2.load_state_dict(opt_state); sched2.load_state_dict(sched_state)
    resumed = []
    for _ in range(12):
        resumed.append(opt2.param_groups[0]["lr"]); opt2.step(); sched2.step()
    assert resumed == full[8:]


def test_cooldown_from_train_config_falls_linearly_to_the_last_step():
    "Equation (3) until the last cooldown_steps, then times (max_steps - k + 1) / cooldown_steps; resumes identically."
    cfg = TrainConfig(warmup_steps=5, max_steps=30, cooldown_steps=12, lr_factor=0.7)
    def rates(opt, sched, n):
        out = []
        for _ in range(n): out.append(opt.param_groups[0]["lr"]); opt.step(); sched.step()
        return out
    opt, sched = make_optimizer_and_scheduler(nn.Linear(3, 2), 64, cfg)
    used = rates(opt, sched, 30)
    for k, lr in enumerate(used, start=1):
        expected = 0.7 * equation_3(k, 64, 5) * (1 if k <= 18 else (31 - k) / 12)
        assert math.isclose(lr, expected, rel_tol=1e-12), (k, lr, expected)
    assert used[-1] < used[-2] < used[17] * 2 / 12 + 1e-12 and used[-1] > 0
    opt2, sched2 = make_optimizer_and_scheduler(nn.Linear(3, 2), 64, cfg)  # resumed inside the cooldown
    rates(opt2, sched2, 22)
    opt3, sched3 = make_optimizer_and_scheduler(nn.Linear(3, 2), 64, cfg)
    opt3.load_state_dict(opt2.state_dict()); sched3.load_state_dict(sched2.state_dict())
    assert rates(opt3, sched3, 8) == used[22:]
    # no cooldown: exactly equation (3), as before the option existed
    plain = rates(*make_optimizer_and_scheduler(nn.Linear(3, 2), 64, TrainConfig(warmup_steps=5, max_steps=30, lr_factor=0.7)), 30)
    assert plain[:18] == used[:18] and all(math.isclose(a, 0.7 * equation_3(k, 64, 5), rel_tol=1e-12) for k, a in enumerate(plain, 1))


@pytest.mark.parametrize("kw,name", [(dict(cooldown_steps=-1), "cooldown_steps=-1"),
                                     (dict(max_steps=100, cooldown_steps=101), "cooldown_steps=101: expected at most max_steps=100")])
def test_cooldown_bad_settings(kw, name):
    with pytest.raises(ValueError, match=name):
        TrainConfig(**kw)
    with pytest.raises(ValueError, match=name.split(":")[0]):
        cooldown(1, kw.get("max_steps", 10), kw["cooldown_steps"])


@pytest.mark.parametrize("call,name", [
    (lambda: noam_lr(1, 512, 0), "warmup_steps=0"),
    (lambda: noam_lr(1, 512, -5), "warmup_steps=-5"),
    (lambda: noam_lr(1, 0, 4000), "d_model=0"),
    (lambda: noam_lr(0, 512, 4000), "step=0"),
    (lambda: make_scheduler(make_optimizer(nn.Linear(2, 2)), -1, 4000), "d_model=-1"),
    (lambda: make_scheduler(make_optimizer(nn.Linear(2, 2)), 512, 0), "warmup_steps=0"),
    (lambda: make_scheduler(torch.optim.Adam(nn.Linear(2, 2).parameters(), lr=0.5), 512, 10), "base lr is 0.5"),
])
def test_schedule_bad_input(call, name):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        call()


# ---------------------------------------------------------------- loss

def random_batch(B=5, T=9, V=13, pad_idx=0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(B, T, V, generator=g) * 2).to(dtype)
    tgt = torch.randint(0, V, (B, T), generator=g)
    tgt = torch.where(tgt == pad_idx, (pad_idx + 1) % V, tgt)  # no pad inside sentences...
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    tgt[torch.arange(T) >= lengths[:, None]] = pad_idx  # ...only at the end
    return logits, tgt


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3, 0.9])
@pytest.mark.parametrize("pad_idx", [0, 4])
def test_loss_equals_torch_cross_entropy(eps, pad_idx):
    logits, tgt = random_batch(pad_idx=pad_idx, seed=int(eps * 10) + pad_idx)
    V = logits.size(-1)
    assert (tgt == pad_idx).any() and (tgt != pad_idx).any()
    ref = F.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=pad_idx, label_smoothing=eps)
    ours = label_smoothed_cross_entropy(logits, tgt, eps, pad_idx)
    assert torch.allclose(ours, ref, atol=1e-6, rtol=0)
    loss_sum, n = LabelSmoothingLoss(eps, pad_idx)(logits, tgt)
    assert n.item() == (tgt != pad_idx).sum().item()
    assert torch.allclose(loss_sum / n, ref, atol=1e-6, rtol=0)
    ref_none = F.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=pad_idx, label_smoothing=eps,
                               reduction="none").view_as(tgt)
    assert torch.allclose(label_smoothed_cross_entropy(logits, tgt, eps, pad_idx, reduction="none"), ref_none, atol=1e-5)


def test_loss_is_cross_entropy_with_smoothed_target():
    logits, tgt = random_batch(seed=3)
    q = smooth_targets(tgt, logits.size(-1), 0.1)
    assert torch.allclose(q.sum(-1), torch.ones(tgt.shape))
    keep = tgt != 0
    literal = -(q * logits.log_softmax(-1)).sum(-1)[keep].mean()
    assert torch.allclose(label_smoothed_cross_entropy(logits, tgt, 0.1), literal, atol=1e-6)


def test_bf16_logits_give_fp32_loss():
    logits, tgt = random_batch(seed=4, dtype=torch.bfloat16)
    loss = label_smoothed_cross_entropy(logits, tgt, 0.1)
    assert loss.dtype == torch.float32
    ref = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1), ignore_index=0, label_smoothing=0.1)
    assert torch.allclose(loss, ref, atol=1e-6)


def test_padding_positions_get_zero_gradient():
    logits, tgt = random_batch(seed=5)
    logits[tgt == 0] *= 100  # extreme logits at padding change nothing
    x = logits.clone().requires_grad_()
    loss_sum, n = LabelSmoothingLoss(0.1, 0)(x, tgt)
    (loss_sum / n).backward()
    pad = tgt == 0
    assert pad.any()
    assert x.grad[pad].abs().max().item() == 0.0
    assert (x.grad[~pad].abs().sum(-1) > 0).all()
    # and the loss does not depend on the padding logits
    y = logits.clone(); y[pad] = torch.randn_like(y[pad])
    assert torch.equal(LabelSmoothingLoss(0.1, 0)(y, tgt)[0], loss_sum.detach())


def test_accumulation_sum_over_total_tokens_equals_full_batch():
    torch.manual_seed(0)
    V, D = 11, 8
    proj = nn.Linear(D, V)
    h = torch.randn(6, 7, D)
    tgt = torch.randint(1, V, (6, 7))
    tgt[0, 1:] = 0; tgt[1, 3:] = 0; tgt[4, 5:] = 0  # unequal padding across micro-batches
    crit = LabelSmoothingLoss(0.1, 0)

    proj.zero_grad()
    s, n = crit(proj(h), tgt); (s / n).backward()
    g_full = [p.grad.clone() for p in proj.parameters()]

    proj.zero_grad()
    total = sum(crit(proj(h[sl]), tgt[sl])[1] for sl in (slice(0, 2), slice(2, 6)))  # counts only
    for sl in (slice(0, 2), slice(2, 6)):  # micro-batches of different sizes
        s, _ = crit(proj(h[sl]), tgt[sl]); (s / total).backward()
    g_acc = [p.grad.clone() for p in proj.parameters()]
    for a, b in zip(g_acc, g_full):
        assert torch.allclose(a, b, atol=1e-6)

    proj.zero_grad()  # the wrong way: average of micro-batch means
    for sl in (slice(0, 2), slice(2, 6)):
        s, n = crit(proj(h[sl]), tgt[sl]); (s / n / 2).backward()
    assert not torch.allclose(proj.weight.grad, g_full[0], atol=1e-4)


def test_loss_minimum_below_full_confidence():
    V, eps = 10, 0.1
    p = torch.linspace(0.5, 0.9999, 5001)
    probs = ((1 - p) / (V - 1)).unsqueeze(1).repeat(1, V); probs[:, 0] = p
    curve = label_smoothed_cross_entropy(probs.log(), torch.zeros(len(p), dtype=torch.long), eps, pad_idx=None,
                                         reduction="none")
    assert abs(p[curve.argmin()].item() - (1 - eps + eps / V)) < 1e-3
    nll = label_smoothed_cross_entropy(probs.log(), torch.zeros(len(p), dtype=torch.long), 0.0, pad_idx=None,
                                       reduction="none")
    assert nll.argmin().item() == len(p) - 1


def test_shape_mismatch_names_both_shapes():
    crit = LabelSmoothingLoss(0.1, 0)
    with pytest.raises(ValueError, match=r"target has shape \(2, 5\) but logits has shape \(2, 6, 7\)"):
        crit(torch.randn(2, 6, 7), torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3, 7\)"):
        label_smoothed_cross_entropy(torch.randn(4, 3, 7), torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer class indices"):
        crit(torch.randn(2, 6, 7), torch.ones(2, 6))


@pytest.mark.parametrize("eps", [1.0, -0.01, 1.5])
def test_label_smoothing_out_of_range(eps):
    with pytest.raises(ValueError, match=r"label_smoothing=.*expected a value in \[0, 1\)"):
        LabelSmoothingLoss(eps, 0)
    with pytest.raises(ValueError, match="label_smoothing="):
        label_smoothed_cross_entropy(torch.randn(2, 3, 5), torch.ones(2, 3, dtype=torch.long), eps)
    with pytest.raises(ValueError, match="label_smoothing="):
        smooth_targets(torch.ones(3, dtype=torch.long), 5, eps)


# ---------------------------------------------------------------- Adam implementations

def adam_by_hand(start, grads_per_step, lr, betas=(0.9, 0.98), eps=1e-9):
    "Adam written out, one parameter at a time, independently of torch.optim."
    params = [p.detach().clone().double() for p in start]
    m = [torch.zeros_like(p) for p in params]; v = [torch.zeros_like(p) for p in params]
    for k, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            g = g.double()
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            params[i] -= lr * (m[i] / (1 - betas[0] ** k)) / ((v[i] / (1 - betas[1] ** k)).sqrt() + eps)
    return params


@pytest.mark.parametrize("impl", ["readable", "foreach", "fused", "auto"])
def test_adam_implementations_match_the_update_written_out(impl):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(7, 6), nn.ReLU(), nn.Linear(6, 4), nn.LayerNorm(4))
    start = [p.detach().clone() for p in net.parameters()]
    grads = [[torch.randn_like(p) * 10 ** (s - 2) for p in start] for s in range(4)]  # gradients of several scales
    opt = make_optimizer(net, **adam_kwargs(impl, list(net.parameters())))
    assert opt.defaults["lr"] == 1.0 and opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    for g in opt.param_groups: g["lr"] = 1e-2
    for step_grads in grads:
        for p, g in zip(net.parameters(), step_grads): p.grad = g.clone()
        opt.step()
    for p, e in zip(net.parameters(), adam_by_hand(start, grads, 1e-2)):
        torch.testing.assert_close(p.detach().double(), e, rtol=0, atol=1e-6)
    assert not torch.equal(start[0], next(net.parameters()))


def test_adam_implementations_agree_on_a_transformer_with_the_schedule():
    "Five steps of the real training loop with each implementation give the same parameters."
    # with eps=1e-9, Adam's update of an entry whose gradient is ~1e-12 is about lr * sign(g): rounding noise in the
    # fused kernel flips such signs. eps=1e-3 makes the update a smooth function of the gradient (as in test_train).
    cfg = TransformerConfig.tiny(dropout=0.0)
    src = torch.randint(3, cfg.src_vocab_size, (4, 6)); tgt = torch.randint(3, cfg.tgt_vocab_size, (4, 6))
    out = {}
    for impl in ("readable", "foreach", "fused"):
        torch.manual_seed(0); model = make_model(cfg)
        opt, sched = make_optimizer_and_scheduler(model, cfg.d_model, TrainConfig(warmup_steps=3, eps=1e-3), impl=impl)
        for _ in range(5):
            s, n = LabelSmoothingLoss(0.1, 0)(model(src, tgt[:, :-1]), tgt[:, 1:]); (s / n).backward()
            opt.step(); opt.zero_grad(); sched.step()
        out[impl] = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(out["foreach"], out["readable"], rtol=0, atol=1e-5)
    torch.testing.assert_close(out["fused"], out["readable"], rtol=0, atol=1e-5)


def test_adam_impl_choice_and_bad_name():
    lin = nn.Linear(2, 2)
    assert adam_impl("auto", list(lin.parameters())) == "fused"  # PyTorch's fused Adam runs on the CPU too
    assert adam_impl("auto", [torch.zeros(2, dtype=torch.long)]) == "foreach"  # no fused kernel for integer tensors
    assert make_optimizer(lin, **adam_kwargs("readable", list(lin.parameters()))).defaults["foreach"] is False
    assert make_optimizer(lin, **adam_kwargs("fused", list(lin.parameters()))).defaults["fused"] is True
    assert make_optimizer_and_scheduler(lin, 8, TrainConfig())[0].defaults["fused"] is True  # the trainer's: auto, fused on the CPU
    assert make_optimizer(lin).defaults["fused"] is None  # the paper's Adam: PyTorch's default kernel
    assert set(ADAM_IMPLS) == {"auto", "readable", "foreach", "fused"}
    with pytest.raises(ValueError, match="impl='adamw'"): adam_kwargs("adamw", list(lin.parameters()))
    with pytest.raises(ValueError, match="impl='adamw'"): make_optimizer_and_scheduler(lin, 8, TrainConfig(), impl="adamw")


@pytest.mark.cuda
def test_adam_auto_is_fused_on_cuda():
    lin = nn.Linear(2, 2).cuda()
    assert adam_impl("auto", list(lin.parameters())) == "fused"
    assert make_optimizer_and_scheduler(lin, 8, TrainConfig())[0].defaults["fused"] is True


# ---------------------------------------------------------------- chunked loss

def hidden_batch(B=5, T=9, D=12, V=23, pad_idx=0, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    gen = nn.Linear(D, V, bias=bias)
    h = torch.randn(B, T, D, generator=g) * 2
    _, tgt = random_batch(B, T, V, pad_idx=pad_idx, seed=seed)
    return h, gen, tgt


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.6])
@pytest.mark.parametrize("pad_idx", [0, 4, None])
@pytest.mark.parametrize("chunk_size", [1, 7, 1024])
@pytest.mark.parametrize("bias", [False, True])
def test_chunked_loss_and_gradients_equal_torch_cross_entropy(eps, pad_idx, chunk_size, bias):
    h, gen, tgt = hidden_batch(pad_idx=0 if pad_idx is None else pad_idx, seed=int(eps * 10) + (pad_idx or 0), bias=bias)
    V = gen.out_features
    params = [gen.weight] + ([gen.bias] if bias else [])

    def run(fn):
        x = h.clone().requires_grad_(); gen.zero_grad()
        loss = fn(x); loss.backward()
        return loss.detach(), [x.grad] + [p.grad.clone() for p in params]

    ref_loss, ref_grads = run(lambda x: F.cross_entropy(gen(x).view(-1, V), tgt.view(-1), label_smoothing=eps,
                                                         ignore_index=-100 if pad_idx is None else pad_idx, reduction="sum"))
    crit = ChunkedLabelSmoothingLoss(eps, pad_idx, chunk_size=chunk_size)
    loss, grads = run(lambda x: crit(x, gen, tgt)[0])
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-4)
    for a, b in zip(grads, ref_grads): torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    n = crit(h, gen, tgt)[1]
    assert n.item() == (tgt.numel() if pad_idx is None else int((tgt != pad_idx).sum()))
    if pad_idx is not None:  # padding rows get exactly zero gradient
        assert (tgt == pad_idx).any() and grads[0][tgt == pad_idx].abs().max().item() == 0.0


def test_chunked_loss_equals_readable_loss_with_a_scaled_backward():
    "The trainer backpropagates loss_sum * world_size / n_total: the stored gradients must be scaled by it."
    h, gen, tgt = hidden_batch(seed=7)
    x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
    s1, n1 = LabelSmoothingLoss(0.1, 0)(gen(x1), tgt); (s1 * 0.37 / n1).backward()
    g1 = (x1.grad, gen.weight.grad.clone(), gen.bias.grad.clone()); gen.zero_grad()
    s2, n2 = ChunkedLabelSmoothingLoss(0.1, 0, chunk_size=4)(x2, gen, tgt); (s2 * 0.37 / n2).backward()
    torch.testing.assert_close(s2, s1.detach(), rtol=1e-6, atol=1e-5)
    for a, b in zip((x2.grad, gen.weight.grad, gen.bias.grad), g1): torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_chunked_loss_under_bf16_autocast_and_without_grad():
    h, gen, tgt = hidden_batch(seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, _ = ChunkedLabelSmoothingLoss(0.1, 0, chunk_size=8)(h, gen, tgt)
        b, _ = LabelSmoothingLoss(0.1, 0)(gen(h), tgt)
    assert a.dtype == torch.float32
    torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)
    with torch.no_grad(): c = chunked_label_smoothed_cross_entropy(h, gen, tgt, 0.1, 0)
    assert not c.requires_grad
    torch.testing.assert_close(c, label_smoothed_cross_entropy(gen(h), tgt, 0.1, 0, reduction="sum").detach())


def test_chunked_loss_tied_weights_get_the_summed_gradient():
    "With the generator tied to an embedding, the weight's gradient is the embedding's plus the generator's."
    torch.manual_seed(0)
    cfg = TransformerConfig.tiny(dropout=0.0)
    src = torch.randint(3, 16, (3, 5)); tgt = torch.randint(3, 16, (3, 6)); tgt[0, 4:] = 0
    grads = []
    for chunked in (False, True):
        torch.manual_seed(0); model = make_model(cfg)
        h = model.decode(tgt[:, :-1], model.encode(src))
        s, n = (ChunkedLabelSmoothingLoss(0.1, 0, 3)(h, model.generator, tgt[:, 1:]) if chunked
                else LabelSmoothingLoss(0.1, 0)(model.generator(h), tgt[:, 1:]))
        (s / n).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert model.generator.weight is model.src_embed.lut.weight
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-7)


def test_chunked_loss_bad_input():
    h, gen, tgt = hidden_batch()
    with pytest.raises(ValueError, match="chunk_size=0"): ChunkedLabelSmoothingLoss(0.1, 0, 0)(h, gen, tgt)
    with pytest.raises(ValueError, match=r"target has shape \(5, 8\) but hidden has shape \(5, 9, 12\)"):
        ChunkedLabelSmoothingLoss(0.1, 0)(h, gen, tgt[:, :8])
    with pytest.raises(TypeError, match="integer class indices"): ChunkedLabelSmoothingLoss(0.1, 0)(h, gen, tgt.float())
    with pytest.raises(ValueError, match="label_smoothing="): ChunkedLabelSmoothingLoss(1.0, 0)


@pytest.mark.parametrize("fill", ["none", "all"])
def test_chunked_loss_with_no_padding_or_only_padding(fill):
    "A batch with no padding gives the readable loss and gradients; one with only padding has zero loss and gradients."
    h, gen, tgt = hidden_batch(seed=5)
    tgt = tgt.clamp(min=1) if fill == "none" else torch.zeros_like(tgt)
    x = h.clone().requires_grad_(); gen.zero_grad()
    s, n = ChunkedLabelSmoothingLoss(0.1, 0, chunk_size=4)(x, gen, tgt); s.backward()
    x2 = h.clone().requires_grad_(); gen2 = nn.Linear(gen.in_features, gen.out_features); gen2.load_state_dict(gen.state_dict())
    s2, n2 = LabelSmoothingLoss(0.1, 0)(gen2(x2), tgt); s2.backward()
    assert n.item() == n2.item() == (tgt.numel() if fill == "none" else 0)
    torch.testing.assert_close(s, s2.detach(), rtol=1e-6, atol=1e-5)
    for a, b in ((x.grad, x2.grad), (gen.weight.grad, gen2.weight.grad), (gen.bias.grad, gen2.bias.grad)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # sums over rows in another order
    if fill == "all": assert s.item() == 0 and x.grad.abs().max().item() == gen.weight.grad.abs().max().item() == 0


# ---------------------------------------------------------------- the fast path's lookups and weight gradient (27b)
def test_hidden_states_looks_up_a_tied_table_once_with_the_same_result():
    "Tied source and target tables: one lookup; the hidden states equal encode/decode's, the gradients to rounding."
    from annotated_transformer.training.loss import HiddenStates
    torch.manual_seed(0)
    cfg = TransformerConfig.tiny(src_vocab_size=30, tgt_vocab_size=30, dropout=0.0)
    m = make_model(cfg)
    assert m.src_embed.lut.weight is m.tgt_embed.lut.weight
    src, tgt = torch.randint(3, 30, (3, 7)), torch.randint(3, 30, (3, 5))
    src[0, 5:] = 0; tgt[1, 3:] = 0
    skp, tkp = src == 0, tgt == 0
    calls = []
    hooks = [e.register_forward_hook(lambda mod, i, o, n=n: calls.append((n, i[0].shape))) for n, e in
             (("src", m.src_embed), ("tgt", m.tgt_embed))]
    got = HiddenStates(m)(src, tgt, skp, tkp)
    assert calls == [("src", (src.numel() + tgt.numel(),))]  # one lookup of both
    for h in hooks: h.remove()
    want = m.decode(tgt, m.encode(src, skp), skp, tkp)
    assert torch.equal(got, want)
    g = torch.randn_like(got)
    (ga,) = torch.autograd.grad(got, m.src_embed.lut.weight, g)
    (gb,) = torch.autograd.grad(want, m.src_embed.lut.weight, g)
    torch.testing.assert_close(ga, gb, rtol=1e-6, atol=1e-6)  # the same sums, added in another order
    assert ga[0].abs().max() == 0  # the padding row gets no gradient
    untied = make_model(TransformerConfig.tiny(src_vocab_size=30, tgt_vocab_size=31, dropout=0.0, tie_embeddings=False))
    calls.clear()
    hooks = [e.register_forward_hook(lambda mod, i, o, n=n: calls.append(n)) for n, e in
             (("src", untied.src_embed), ("tgt", untied.tgt_embed))]
    HiddenStates(untied)(src, tgt, skp, tkp)
    assert calls == ["src", "tgt"]  # separate tables: looked up as encode and decode do

def test_the_chunked_loss_scales_its_weight_gradient_once():
    "backward scales the stored weight gradient in place and hands it on: a second backward is refused, not doubled."
    torch.manual_seed(0)
    gen, h = nn.Linear(8, 13), torch.randn(2, 5, 8, requires_grad=True)
    y = torch.randint(1, 13, (2, 5)); y[0, 3:] = 0
    loss = chunked_label_smoothed_cross_entropy(h, gen, y, 0.1, 0, chunk_size=4)
    want = torch.autograd.grad(label_smoothed_cross_entropy(gen(h), y, 0.1, 0, "sum") * 0.25, gen.weight)[0]
    (loss * 0.25).backward(retain_graph=True)
    torch.testing.assert_close(gen.weight.grad, want, rtol=0, atol=1e-6)
    with pytest.raises(RuntimeError, match="earlier backward"):
        (loss * 0.25).backward()
