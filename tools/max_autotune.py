"""`torch.compile`'s max-autotune mode as a trial beside its default mode (nbs/32b_op_profile.ipynb, *max-autotune*):
the trainer's own step (`make_train_step` with the fast path: chunked loss, fused Adam) of each preset, eager, compiled
in the default mode and compiled with `mode="max-autotune"`, in each precision, timed in turn as the compile benchmark
times its variants.

    python tools/max_autotune.py [--presets multi30k base] [--precisions fp32 bf16] [--batch-size 128] [--out NAME.json]

Each compile starts cold: inductor's caches of graphs are off and its cache folder is a new empty one, removed at the
end, so that a first call's time is a real compile's. malloc keeps freed memory, as at-bench and the trainer have it.
Writes results/bench/NAME.json (default max-autotune-<cpu>-<threads>t.json). Needs quiet cores.
"""
import argparse, sys, time
import torch
from annotated_transformer.bench.benchmarks import (bench_config, make_pair, make_train_step, median,
                                                    random_padded_batch, time_interleaved)
from annotated_transformer.bench.bench_suite import DEFAULT_SHAPES, settings
from annotated_transformer.bench.fast_path import FAST
from annotated_transformer.engine.precision import NATIVE_BF16_FLAGS, cpu_flags, keep_freed_memory
from live_parity import positive_int  # tools/, beside this file
from step_phases import cold_inductor, out_name, write
from step_products import run_or_say

MODES = {"eager": None, "default": "default", "max-autotune": "max-autotune"}  # variant -> torch.compile's mode


def fast_step(model, batch, precision: str, mode: str | None):
    "The trainer's step (chunked loss, fused Adam) of `model`, eager (`mode` None) or compiled in that mode."
    return make_train_step(model, batch, precision, "cpu", **FAST, compile=mode or False)


def trial(preset: str, precision: str, batch_size: int | None, reps: int) -> dict:
    "One preset in one precision: each variant's first call (compiling) and its median step, timed in turn."
    cfg = bench_config(preset)
    B, S = DEFAULT_SHAPES[("cpu", preset)]
    B = batch_size or B
    batch = random_padded_batch(cfg, B, S)
    ours, _ = make_pair(cfg, "cpu")
    steps, first = {}, {}
    for name, mode in MODES.items():
        steps[name] = fast_step(ours, batch, precision, mode)
        t = time.perf_counter(); steps[name](); first[name] = time.perf_counter() - t  # the first call compiles
    times = time_interleaved(steps, reps, 1)
    step = {k: median(v) for k, v in times.items()}
    return dict(batch_size=B, src_len=S, tgt_len=S, first_call_s=first, step_s=step, times=times,
                speed_over_eager={k: step["eager"] / v for k, v in step.items()},
                max_autotune_over_default=step["default"] / step["max-autotune"])


def run(a) -> int:
    if "bf16" in a.precisions and not set(NATIVE_BF16_FLAGS) & cpu_flags():
        raise ValueError(f"--precisions bf16: this CPU has none of {', '.join(NATIVE_BF16_FLAGS)}; its bf16 is emulated "
                         "(many times slower than fp32), so only fp32 is worth a trial here")
    torch.manual_seed(0)
    keep_freed_memory()
    res = dict(command="python tools/max_autotune.py " + " ".join(a.argv), settings=settings("cpu"), reps=a.reps,
               threads=torch.get_num_threads(), torch_compile_modes=MODES, results={})
    with cold_inductor():  # one cache folder for the run, as the stored runs had
        for p in a.presets:
            for prec in a.precisions:
                t0 = time.perf_counter()
                r = res["results"].setdefault(p, {})[prec] = trial(p, prec, a.batch_size, a.reps)
                s, f = r["step_s"], r["first_call_s"]
                print(f"{p} {prec} (batch {r['batch_size']} x {r['src_len']}): step eager {1e3 * s['eager']:.1f} ms, "
                      f"compiled {1e3 * s['default']:.1f} ms (first call {f['default']:.1f} s), max-autotune "
                      f"{1e3 * s['max-autotune']:.1f} ms (first call {f['max-autotune']:.1f} s); max-autotune ÷ "
                      f"default {r['max_autotune_over_default']:.2f}x, "
                      f"÷ eager {r['speed_over_eager']['max-autotune']:.2f}x "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    cpu = res["settings"]["cpu"]["id"].replace(" ", "")
    write(res, a.out or f"max-autotune-{cpu}-{res['threads']}t.json")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", choices=["tiny", "multi30k", "base"], default=["multi30k", "base"])
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    ap.add_argument("--batch-size", type=positive_int, default=None,
                    help="sentences per batch (default: the benchmarks' own for each preset)")
    ap.add_argument("--reps", type=positive_int, default=5, help="timed steps of each variant (the median is kept)")
    ap.add_argument("--out", type=out_name, default=None, help="a file name under results/bench/")
    a = ap.parse_args(argv)
    a.argv = argv
    return run_or_say("max_autotune.py", run, a)


if __name__ == "__main__":
    sys.exit(main())
