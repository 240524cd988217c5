"""Where a greedy decoding step of the shipped Multi30k translator spends its time, on one thread
(nbs/33_bench_suite.ipynb, *Decoding against CTranslate2*): the packed products of one step (three decoder layers and
the output projection, 32 rows) timed in the step's order, so that each weight comes from wherever the others left it;
the same products each repeated with its weight in cache; and the kernels' steps (`PackedDecoderStep`, the layers
without the output projection) of a real greedy search over test2016, by the number of rows left.

    OMP_NUM_THREADS=1 python tools/held_to_avx2.py python tools/step_products.py --out NAME.json

Writes results/bench/NAME.json (default step-products-<cpu>.json). Needs quiet cores: nothing else should run beside it.
"""
import argparse, statistics, sys, time
from pathlib import Path
import torch
from annotated_transformer.architecture.layers import PackedDecoderStep
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.engine.loading import load_model
from annotated_transformer.training.data import default_data_dir, read_lines
from live_parity import positive_int  # tools/, beside this file
from step_phases import out_name, write

ROOT = Path(__file__).resolve().parents[1]
ROWS = 32  # the benchmark's batch: greedy decoding's rows while no sentence has finished


def step_products(model) -> list:
    """The packed products of one decoder step as `PackedDecoderStep` reads them, in its order, then the output
    projection: (name, weight, bias, K, N, post-op)."""
    args = PackedDecoderStep(model).args
    if args is None: raise ValueError("the model is not packed: its step runs through its modules")
    names = ("qkv", "self_out", "cross_q", "cross_out", "ff1", "ff2")  # six a layer, as `_decoder_layers` runs them
    out = [(f"{i // 6}.{names[i % 6]}", w, b, w.size(1), w.size(0), "relu" if names[i % 6] == "ff1" else "none")
           for i, (w, b) in enumerate(zip(args["weights"], args["biases"]))]
    g = model.generator
    return out + [("generator", g.packed, None if g.bias is None else g.bias.detach(), g.in_features, g.out_features,
                   "none")]


def time_products(prods, passes: int) -> dict:
    """The products in turn (the best of `passes`; the decoder layers' alone, before the output projection), and each
    one repeated with its weight in cache (the best of 5)."""
    xs = {k: torch.randn(ROWS, 1, k) for k in {p[3] for p in prods}}
    run = lambda p: torch.ops.mkldnn._linear_pointwise(xs[p[3]], p[1], p[2], p[5], [], "")
    flops = sum(2 * ROWS * p[3] * p[4] for p in prods)
    with torch.no_grad():
        for _ in range(3): [run(p) for p in prods]
        turns, layers = [], []
        for _ in range(passes):
            t = time.perf_counter(); [run(p) for p in prods[:-1]]; m = time.perf_counter(); run(prods[-1])
            turns.append(time.perf_counter() - t); layers.append(m - t)
        hot = []
        for _ in range(5):
            total = 0.0
            for p in prods:
                run(p); t = time.perf_counter()
                for _ in range(10): run(p)
                total += (time.perf_counter() - t) / 10
            hot.append(total)
    return dict(products=len(prods), rows=ROWS, gflop=flops / 1e9,
                in_turn_ms=1e3 * min(turns), in_turn_gflops=flops / min(turns) / 1e9,
                layers_in_turn_ms=1e3 * min(layers), output_projection_ms=1e3 * (min(turns) - min(layers)),
                hot_ms=1e3 * min(hot), hot_gflops=flops / min(hot) / 1e9)


def greedy_steps(tr, lines: list[str]) -> dict:
    "A greedy search of `lines` (batch 32): the kernels' steps, their median time by rows left."
    rec, call = [], PackedDecoderStep.__call__
    def timed(self, tok, *a):
        t = time.perf_counter(); h = call(self, tok, *a)
        if h is not None: rec.append((tok.size(0), time.perf_counter() - t))
        return h
    PackedDecoderStep.__call__ = timed
    try:
        tr.translate(lines[:64], beam_size=1, batch_size=ROWS)  # warm-up: the loop compiled, the kernels chosen
        rec.clear(); t = time.perf_counter(); tr.translate(lines, beam_size=1, batch_size=ROWS)
        wall = time.perf_counter() - t
    finally: PackedDecoderStep.__call__ = call
    bands = {}
    for lo, hi in ((28, 32), (16, 27), (1, 15)):
        ts = [s for n, s in rec if lo <= n <= hi]
        if ts: bands[f"{lo}-{hi}"] = dict(steps=len(ts), median_ms=1e3 * statistics.median(ts))
    return dict(sentences=len(lines), wall_s=wall, steps=len(rec), steps_s=sum(s for _, s in rec), rows=bands)


def test2016(data_dir, lang: str, n: int) -> tuple[Path, list[str]]:
    "test2016's `lang` side in the data folder (its multi30k/, default: the project's): its path and first `n` lines."
    f = Path(data_dir or default_data_dir()) / "multi30k" / f"test_2016_flickr.{lang}.gz"
    return f, read_lines(f, "--data-dir: the folder holding multi30k/")[:n]


def test2016_batches(data_dir, n: int) -> list[str]:
    """test2016's first `n` German lines, for a tool that decodes them in batches of `ROWS`: a ValueError naming the
    file where fewer than one batch are read."""
    src, lines = test2016(data_dir, "de", n)
    if len(lines) < ROWS:
        raise ValueError(f"{src}: {len(lines)} sentences read; the batches are of {ROWS}, so at least {ROWS} are "
                         "needed (--sentences)")
    return lines


def run(a) -> int:
    torch.set_num_threads(1)
    src, lines = test2016(a.data_dir, "de", a.sentences)
    if len(lines) < ROWS:  # the first step of the first batch must have all its rows
        raise ValueError(f"{src}: {len(lines)} sentences read; the step is timed at {ROWS} rows, so at least {ROWS} "
                         "are needed (--sentences)")
    tr = load_model(a.checkpoint, "at-translate")
    prods = step_products(tr.model)
    res = dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
               products=time_products(prods, a.passes))
    res["greedy"] = greedy_steps(tr, lines)
    write(res, a.out or f"step-products-{res['settings']['cpu']['id'].replace(' ', '')}.json")
    al, g = res["products"], res["greedy"]["rows"]["28-32"]
    print(f"a step's decoder products in turn {al['layers_in_turn_ms']:.2f} ms "
          f"({al['in_turn_gflops']:.1f} GFLOP/s with "
          f"the output projection, {al['hot_gflops']:.1f} hot); a greedy step of 28-32 rows {g['median_ms']:.2f} ms")
    return 0


def test2016_args(doc: str, sentences: str) -> argparse.ArgumentParser:
    """The command line these test2016 tools share (this one, decode_precision.py, side_by_side.py): the checkpoint,
    the data folder, the number of sentences and the output name; each adds its own after."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "pretrained" / "multi30k-de-en"))
    ap.add_argument("--data-dir", default=None,
                    help="the folder holding multi30k/ (default: the project's data folder)")
    ap.add_argument("--sentences", type=positive_int, default=1000, help=sentences)
    ap.add_argument("--out", type=out_name, default=None, help="a file name under results/bench/")
    return ap


def run_or_say(tool: str, run, a, errors=(OSError, ValueError)) -> int:
    "`run(a)`; an error of the kinds given is one line on stderr, naming the tool, and exit status 1."
    try: return run(a)
    except errors as e:
        print(f"{tool}: {e}", file=sys.stderr); return 1


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences for the greedy search")
    ap.add_argument("--passes", type=positive_int, default=30, help="timed passes over the step's products")
    return run_or_say("step_products.py", run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
