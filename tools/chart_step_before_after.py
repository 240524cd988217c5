"""The chart parser's training step before and after the changes that made it faster, timed in one run on the same WSJ
batches: the span classifier's differences by `index_select`, its elementwise work in the autocast's precision, and
`Dropout` as one product with a mask (nbs/20_chart_parser.ipynb, nbs/34_fast_attention.ipynb), against the code they
replaced (copied below, as it was), each in fp32 and bf16; and the precision `auto` picks for the new step.

    OMP_NUM_THREADS=2 python tools/chart_step_before_after.py [--steps 16] [--warm 3] [--rounds 2] [--n-layers N] [--out NAME.json]

Writes results/bench/chart-step-<cpu>-<threads>t.json (or --out, a name under results/bench/). Needs quiet cores: nothing
else should run beside it. The process keeps freed memory (`keep_freed_memory`), as the trainer does, for every variant.
"""
import argparse, copy, sys, time, types
import torch, torch.nn as nn, torch.nn.functional as F
from annotated_transformer.architecture.attention import Dropout
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.bench.benchmarks import time_blocks
from annotated_transformer.engine.precision import (autocast_for, keep_freed_memory, precision_trial, resolve_precision,
                                                    cpu_flags, NATIVE_BF16_FLAGS)
from annotated_transformer.parsing.chart import ChartParser, ChartObjective
from live_parity import positive_int  # tools/, beside this file
from step_phases import out_name, one_line_errors, chart_batches, write

class _DropoutBefore(nn.Module):
    "`Dropout.forward` as it was: a select of the scaled input (two passes forward, two backward)."
    def __init__(self, p: float): super().__init__(); self.p = p
    def forward(self, x):
        if not self.training or self.p == 0: return x
        k = min(round(self.p * 65536), 65535)
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-2**63, 2**63 - 1)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= k - 32768
        return torch.where(keep, x * (65536 / (65536 - k)), 0.0)


def _span_scores_before(self, words, chars, lengths, h=None):
    "`ChartParser.span_scores` as it was: the differences by advanced indexing, the classifier on fp32 differences."
    if h is None: h = self.encode(words, chars, lengths)
    fwd, bwd = h[..., 0::2], h[..., 1::2]
    N = words.size(1) - 2
    fence = torch.cat([fwd[:, : N + 1], bwd[:, 1:]], -1)
    i, j = torch.triu_indices(N + 1, N + 1, 1, device=words.device)
    first = self.label[0]
    with torch.autocast(h.device.type, enabled=False):
        g = F.linear(fence.float(), first.weight.float())
    return self.label[1:](g[:, j] - g[:, i] + first.bias)


def before(model: ChartParser) -> ChartParser:
    "A copy of `model` (same weights) that runs the code as it was."
    m = copy.deepcopy(model)
    for mod in list(m.modules()):
        for name, child in list(mod.named_children()):
            if isinstance(child, Dropout): setattr(mod, name, _DropoutBefore(child.p).train(child.training))
    m.span_scores = types.MethodType(_span_scores_before, m)
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=positive_int, default=16, help="timed steps per block")
    ap.add_argument("--warm", type=positive_int, default=3, help="untimed steps before each block")
    ap.add_argument("--rounds", type=positive_int, default=2, help="blocks of each variant, in turn")
    ap.add_argument("--n-layers", type=positive_int, default=None,
                    help="encoder layers (default: the preset's); 8: the recipe of the n8-28000 run of 20_chart_parser")
    ap.add_argument("--out", type=out_name, help="file name under results/bench/")
    return one_line_errors("chart_step_before_after.py", run, ap.parse_args(argv), argv)


def run(a, argv) -> int:
    t_start, c_start = time.perf_counter(), time.process_time()
    keep_freed_memory()
    torch.manual_seed(0)
    data, batches = chart_batches(a.steps + a.warm, a.n_layers)
    cfg = data.model_config
    obj = ChartObjective(data.tokenizer, cfg.loss, cfg.tag_loss)
    new = ChartParser(cfg).train()
    models = {"before": before(new), "after": new}
    native = sorted(cpu_flags() & set(NATIVE_BF16_FLAGS))
    precisions = ("fp32", "bf16") if native else ("fp32",)  # emulated bf16 is many times slower: not timed
    runs = {f"{code}, {p}": (copy.deepcopy(m), p) for code, m in models.items() for p in precisions}
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-4) for k, (m, _) in runs.items()}
    dev = torch.device("cpu")

    def step(k, b):
        m, p = runs[k]
        opts[k].zero_grad()
        with autocast_for(dev, p): s = obj.loss(m, b) / len(b)
        s.backward(); opts[k].step()
    blocks = time_blocks({k: (lambda b, k=k: step(k, b)) for k in runs}, batches, a.warm, a.rounds)
    per = {k: min(v) for k, v in blocks.items()}
    trial = lambda: precision_trial(new, batches[0], dev, loss_fn=obj.trial_loss)
    auto, why = resolve_precision("auto", dev, trial)
    st = settings("cpu")
    res = dict(command="python tools/chart_step_before_after.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               settings=st, steps=a.steps, warm=a.warm, rounds=a.rounds,
               words_per_block=sum(int(b.lengths.sum()) for b in batches[a.warm:]),
               n_layers=cfg.n_layers, seconds_per_step=per, blocks=blocks, auto=auto, auto_why=why,
               speedup_after_auto_over_before_fp32=per["before, fp32"] / per[f"after, {auto}"],
               wall_s=round(time.perf_counter() - t_start, 1), cpu_s=round(time.process_time() - c_start, 1),
               note="each step: the ptb-chart preset's span loss, backward and Adam on one WSJ batch of its 1500-word "
                    "budget, from initialization; each variant's fastest block. 'before' is the code these changes "
                    "replaced, copied into the tool; the shipped parser trained in fp32 (--precision fp32).")
    cpu = st["cpu"]["model"].lower().replace(" ", "-")
    flag = "-" + native[0].replace("_", "") if native else ""
    layers = f"-n{cfg.n_layers}" if a.n_layers else ""
    write(res, a.out or f"chart-step{layers}-{cpu}{flag}-{torch.get_num_threads()}t.json")
    for k, v in per.items(): print(f"{k}: {v:.3f} s/step")
    print(f"auto: {auto} ({why}); after ({auto}) is {res['speedup_after_auto_over_before_fp32']:.2f}x as fast as "
          f"before (fp32)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
