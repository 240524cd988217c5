"Tests of the schedule of equation (3) (optim.py) and the label-smoothed loss (loss.py)."
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from annotated_transformer.config import TrainConfig
from annotated_transformer.loss import LabelSmoothingLoss, label_smoothed_cross_entropy, smooth_targets
from annotated_transformer.optim import make_optimizer, make_optimizer_and_scheduler, make_scheduler, noam_lr


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
