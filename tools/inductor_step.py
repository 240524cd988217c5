"""Inductor's fused kernels for our decoding step, as a trial (nbs/33_bench_suite.ipynb, *Decoding against
CTranslate2*): the shipped Multi30k translator on test2016, batch 32, greedy and beam 4, as `translate` serves it (its
Linears packed, each step as its kernels, the layer loop compiled by TorchScript), against the same model with plain
Linears whose every decoder step (the layers, the output layer and its log-softmax) is one function compiled by
`torch.compile` (dynamic shapes, inductor's freezing, so that inductor packs the weights itself and fuses the
element-wise work between the products), in two settings: inductor's defaults, and lean (C++ wrapper code, no guards
on the modules). The plain model with every step through its modules runs beside them, as the compiled step's eager
twin. The decoders' passes alternate; after the timed passes, one pass of each runs under torch.profiler.

    python tools/inductor_step.py --out NAME.json
    python tools/held_to_avx2.py python tools/inductor_step.py --out NAME.json

Each search compiles anew (torch._dynamo.reset), with inductor's caches of graphs off, in a cache folder new and empty for
the run and removed at the end (a C++ kernel already built in the run is reused). Writes
results/bench/NAME.json (default inductor-step-<cpu>-<threads>t.json). Needs quiet cores.
"""
import sys, time
from contextlib import contextmanager
import torch
from annotated_transformer.architecture.layers import pack_linears
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.bench.benchmarks import median
from annotated_transformer.bench.op_profile import op_times, op_summary
from annotated_transformer.engine.loading import load_model
from annotated_transformer.training.decode import DecoderState
from annotated_transformer.translation import inference
from live_parity import positive_int  # tools/, beside this file
from step_phases import cold_inductor, write
from step_products import ROWS, run_or_say, test2016_args, test2016_batches

SEARCHES = {"greedy": 1, "beam4": 4}  # name -> beam size
SETTINGS = {  # compiled variant -> torch.compile's options (inductor's settings, and the guards kept)
    "inductor": {},
    "inductor_lean": dict(cpp_wrapper=True, guard_filter_fn=torch.compiler.skip_guard_on_all_nn_modules_unsafe)}


def model_step(model, tok, memory, mask, cache: list, t: int):
    "One cached step through the modules and the output layer: what `DecoderState.step` returns, as one function."
    h = model.decode(tok, memory, mask, cache=cache, offset=t)  # (N, 1, D); the cache gains step t
    return model.generator(h[:, -1]).log_softmax(-1)  # (N, V)


@contextmanager
def stepping(step_fn):
    """`DecoderState.step` through `step_fn(model, tok, memory, mask, cache, t)` wherever a search uses the growing
    cache (the searches `translate` runs); put back on leaving, after an error too."""
    orig = DecoderState.step
    def step(self, ys):
        if self.cache is None or self.static is not None: return orig(self, ys)
        return step_fn(self.model, ys[:, -1:], self.memory, self.mask, self.cache, ys.size(1) - 1)
    DecoderState.step = step
    try: yield
    finally: DecoderState.step = orig


def decoders(served, plain, compile_fn=torch.compile) -> dict:
    "Name -> (translator, the step a pass runs with; None: as served)."
    out = {"served": (served, None), "plain_modules": (plain, model_step)}
    for name, opts in SETTINGS.items():
        out[name] = (plain, compile_fn(model_step, dynamic=True, options=dict(opts)))
    return out


def translators(checkpoint) -> tuple:
    "The translator as served, and the same with the decoder's Linears plain (the encoder as served)."
    plain = load_model(checkpoint, "at-translate", pack=False)
    pack_linears(plain.model.encoder)  # only the decoder's steps differ
    return load_model(checkpoint, "at-translate"), plain


def one_pass(tr, step_fn, lines: list[str], beam: int) -> list[str]:
    "One pass over `lines` as `translate` searches them, each step through `step_fn` (None: as served)."
    run = lambda: inference.translate(tr.model, tr.tokenizer, lines, beam_size=beam, batch_size=ROWS)
    if step_fn is None: return run()
    with stepping(step_fn): return run()


def measure(decs: dict, lines: list[str], beam: int, reps: int) -> dict:
    """Each decoder's first pass (for a compiled step: compiling), then `reps` timed passes of each in turn, then one
    profiled pass of each; what each translates, against the served translator."""
    first, wall, outs, prof, same = {}, {k: [] for k in decs}, {}, {}, {k: True for k in decs}
    for k, (tr, fn) in decs.items():
        t = time.perf_counter(); outs[k] = one_pass(tr, fn, lines, beam); first[k] = time.perf_counter() - t
    for _ in range(reps):
        for k, (tr, fn) in decs.items():
            t = time.perf_counter(); o = one_pass(tr, fn, lines, beam); wall[k].append(time.perf_counter() - t)
            same[k] = same[k] and o == outs[k]
    for k, (tr, fn) in decs.items():
        ops = op_times(lambda: one_pass(tr, fn, lines, beam), "cpu")
        top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:10]
        prof[k] = dict(op_summary(ops, 1), top=[dict(name=n, ms=ms, calls=c) for n, (ms, c) in top])
    med = {k: median(v) for k, v in wall.items()}
    return dict(first_pass_s=first, wall_s={k: sorted(v) for k, v in wall.items()}, median_s=med,
                speed_over_served={k: med["served"] / v for k, v in med.items()},
                speed_over_plain_modules={k: med["plain_modules"] / v for k, v in med.items()},
                identical_to_served={k: sum(a == b for a, b in zip(o, outs["served"])) / len(lines)
                                     for k, o in outs.items()},
                same_every_pass=same, profile=prof)


def run(a) -> int:
    torch.set_num_threads(a.threads)
    lines = test2016_batches(a.data_dir, a.sentences)
    served, plain = translators(a.checkpoint)
    res = dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
               sentences=len(lines), batch_size=ROWS, reps=a.reps, threads=a.threads,
               compile_options={k: {o: getattr(v, "__name__", v) for o, v in s.items()} for k, s in SETTINGS.items()},
               searches={})
    # inductor's freezing (weights as constants, packed by inductor) for both compiled variants: torch.compile's
    # options do not reach it, so it is set around the passes, which compile, and not for the whole process
    with cold_inductor(), torch._inductor.config.patch(freezing=True):
        for k, beam in SEARCHES.items():
            t0 = time.perf_counter()
            torch._dynamo.reset()  # each search compiles from nothing
            r = res["searches"][k] = measure(decoders(served, plain), lines, beam, a.reps)
            print(f"{k} ({time.perf_counter() - t0:.0f} s): " + "; ".join(
                f"{n} {1e3 * r['median_s'][n]:.0f} ms ({r['speed_over_served'][n]:.2f}x served, first pass "
                f"{r['first_pass_s'][n]:.1f} s, identical {100 * r['identical_to_served'][n]:.1f}%)"
                for n in r["median_s"]),
                flush=True)
    write(res, a.out or f"inductor-step-{res['settings']['cpu']['id'].replace(' ', '')}-{a.threads}t.json")
    return 0


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences")
    ap.add_argument("--reps", type=positive_int, default=5, help="timed passes of each decoder (the median is kept)")
    ap.add_argument("--threads", type=positive_int, default=2, help="torch threads")
    return run_or_say("inductor_step.py", run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
