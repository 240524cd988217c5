"""What a second thread gives our decoding, operator group by operator group (nbs/33_bench_suite.ipynb, *Decoding
against CTranslate2*): the shipped Multi30k translator on test2016, batch 32, greedy and beam 4, served as `translate`
serves it (the kernel step, its layer loop compiled), on one thread and on two. For each search and thread count: the
median wall time of a pass without the profiler, and the self time of each operator group of the op profile
(`op_group`, nbs/32b_op_profile.ipynb) summed over the profiled passes, with its calls and time per call; then, per
group, one thread's time over two threads'. The passes alternate the thread counts, so that a change in the machine's
load falls on both alike.

    python tools/decode_threads.py --out NAME.json
    python tools/held_to_avx2.py python tools/decode_threads.py --out NAME.json

Writes results/bench/NAME.json (default decode-threads-<cpu>.json). Needs quiet cores: nothing else should run beside
it.
"""
import sys, time
import torch
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.bench.benchmarks import median
from annotated_transformer.bench.op_profile import op_times, op_group, op_summary
from annotated_transformer.engine.loading import load_model
from annotated_transformer.translation import inference
from live_parity import positive_int  # tools/, beside this file
from step_phases import write
from step_products import ROWS, run_or_say, test2016_args, test2016_batches

SEARCHES = {"greedy": 1, "beam4": 4}  # name -> beam size
THREADS = (1, 2)


def one_pass(tr, lines: list[str], beam: int) -> list[str]:
    "One pass over `lines` as the served translator searches them."
    return inference.translate(tr.model, tr.tokenizer, lines, beam_size=beam, batch_size=ROWS)


def gains(one: dict, two: dict) -> dict:
    """Per group of two `op_summary` records (one thread, two threads): one thread's self time over two threads'
    (None where two threads spent none), and the same for the total."""
    g = {k: (ms / two["groups_ms"][k] if two["groups_ms"][k] > 0 else None) for k, ms in one["groups_ms"].items()}
    return dict(groups=g, total=one["total_ms"] / two["total_ms"])


def measure(tr, lines: list[str], beam: int, reps: int) -> dict:
    "Wall times and profiles of `reps` passes at each of `THREADS`, alternated; torch's thread count is restored."
    wall, ops, outs = {n: [] for n in THREADS}, {n: {} for n in THREADS}, {}
    threads = torch.get_num_threads()
    try:
        for n in THREADS:  # warm-up, untimed: each thread count's first pass builds its kernels and buffers
            torch.set_num_threads(n); one_pass(tr, lines[:2 * ROWS], beam)
        for _ in range(reps):
            for n in THREADS:
                torch.set_num_threads(n)
                t = time.perf_counter(); outs[n] = one_pass(tr, lines, beam); wall[n].append(time.perf_counter() - t)
                for name, (ms, c) in op_times(lambda: one_pass(tr, lines, beam), "cpu").items():
                    a = ops[n].setdefault(name, [0.0, 0]); a[0] += ms; a[1] += c
    finally: torch.set_num_threads(threads)
    res = {}
    for n in THREADS:
        s = op_summary(ops[n], reps)  # per pass
        calls = {g: 0 for g in s["groups_ms"]}
        for name, (_, c) in ops[n].items(): calls[op_group(name)] += c / reps
        s["groups_calls"] = calls
        s["groups_us_per_call"] = {g: (1e3 * ms / calls[g] if calls[g] else None) for g, ms in s["groups_ms"].items()}
        med = median(wall[n])
        res[str(n)] = dict(wall_s=sorted(wall[n]), median_s=med, sentences_per_s=len(lines) / med, profile=s)
    one, two = res["1"], res["2"]
    return dict(threads=res, wall_gain=two["sentences_per_s"] / one["sentences_per_s"],
                profile_gain=gains(one["profile"], two["profile"]),
                identical=sum(x == y for x, y in zip(outs[1], outs[2])) / len(lines))


def run(a) -> int:
    lines = test2016_batches(a.data_dir, a.sentences)
    tr = load_model(a.checkpoint, "at-translate")
    res = dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
               sentences=len(lines), batch_size=ROWS, reps=a.reps, threads=list(THREADS),
               searches={k: measure(tr, lines, b, a.reps) for k, b in SEARCHES.items()})
    write(res, a.out or f"decode-threads-{res['settings']['cpu']['id'].replace(' ', '')}.json")
    for k, r in res["searches"].items():
        one, two = r["threads"]["1"], r["threads"]["2"]
        p1, p2 = one["profile"], two["profile"]
        print(f"{k}: two threads ÷ one {r['wall_gain']:.2f}x in wall time, {r['profile_gain']['total']:.2f}x in "
              f"the operators' self time ({p1['total_ms']:.0f} and {p2['total_ms']:.0f} ms a profiled pass; a pass "
              f"without the profiler {1e3 * one['median_s']:.0f} and {1e3 * two['median_s']:.0f} ms)")
        for g, x in r["profile_gain"]["groups"].items():
            if p1["groups_ms"][g] >= 1:
                print(f"  {g:22s} {p1['groups_ms'][g]:7.1f} -> {p2['groups_ms'][g]:7.1f} ms "
                      f"({p2['groups_calls'][g]:.0f} calls, {p2['groups_us_per_call'][g]:.1f} us each): {x:.2f}x")
    return 0


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences")
    ap.add_argument("--reps", type=positive_int, default=5, help="passes at each thread count (wall time: the median)")
    return run_or_say("decode_threads.py", run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
