"""What `one_beam_search` buys greedy decoding (nbs/35_fast_decoding.ipynb, *One beam*), measured in one process: the
shipped Multi30k translator on test2016, batch 32, greedy, searched by `one_beam_search` (as served) and by beam
search's general loop with one beam (`one_beam=False`), the passes alternated, on one thread and with two workers
side by side (`translate_threads`, one thread each). In one process both searches use the same weights in the same
memory, so a difference of a few hundredths is the searches', not two processes' (the `ct2` benchmark times each
decoder in a process of its own, and two processes of the same code lie that far apart).

    python tools/one_beam.py --out NAME.json

Writes results/bench/NAME.json (default one-beam-<cpu>.json). Needs quiet cores: nothing else should run beside it.
"""
import functools, sys, time
import torch
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.engine.loading import load_model
from annotated_transformer.training.decode import beam_search
from annotated_transformer.translation import inference
from live_parity import positive_int  # tools/, beside this file
from step_phases import write
from step_products import ROWS, run_or_say, test2016, test2016_args

SEARCHES = {"one_beam": beam_search, "loop": functools.partial(beam_search, one_beam=False)}  # as `translate` calls it


def timed(tr, lines: list[str], workers: int, search) -> tuple[list[str], float]:
    "One greedy pass over `lines` with `search` in `translate`'s place: (translations, seconds)."
    inference.beam_search = search
    try:
        t = time.perf_counter()
        if workers == 1: out = inference.translate(tr.model, tr.tokenizer, lines, beam_size=1, batch_size=ROWS)
        else: out = inference.translate_threads(tr.model, tr.tokenizer, lines, workers=workers, beam_size=1, batch_size=ROWS)
        return out, time.perf_counter() - t
    finally: inference.beam_search = beam_search


def run(a) -> int:
    src, lines = test2016(a.data_dir, "de", a.sentences)
    if len(lines) < 2 * ROWS:  # two batches at least, one for each worker
        raise ValueError(f"{src}: {len(lines)} sentences read; two workers need two batches of {ROWS}, so at least "
                         f"{2 * ROWS} are needed (--sentences)")
    tr, threads = load_model(a.checkpoint, "at-translate"), torch.get_num_threads()
    res = dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
               sentences=len(lines), batch_size=ROWS, reps=a.reps, workers={})
    try:
        for workers in (1, 2):
            torch.set_num_threads(1)  # one thread a worker; `translate_threads` sets its own and restores this one
            for s in SEARCHES.values(): timed(tr, lines[:2 * ROWS], workers, s)  # warm-up, untimed
            secs, outs = {n: [] for n in SEARCHES}, {}
            for _ in range(a.reps):  # alternated, so that a change in the machine's load falls on both alike
                for n, s in SEARCHES.items():
                    outs[n], t = timed(tr, lines, workers, s); secs[n].append(t)
            rate = {n: len(lines) / sorted(t)[len(t) // 2] for n, t in secs.items()}
            res["workers"][str(workers)] = dict(
                sentences_per_s=rate, seconds={n: sorted(t) for n, t in secs.items()},
                one_beam_over_loop=rate["one_beam"] / rate["loop"],
                identical=sum(x == y for x, y in zip(outs["one_beam"], outs["loop"])) / len(lines))
    finally: torch.set_num_threads(threads)
    write(res, a.out or f"one-beam-{res['settings']['cpu']['id'].replace(' ', '')}.json")
    for w, r in res["workers"].items():
        print(f"{w} worker(s): one_beam_search {r['sentences_per_s']['one_beam']:.1f} sentences/s, the general loop "
              f"{r['sentences_per_s']['loop']:.1f}: {r['one_beam_over_loop']:.3f}x; identical {r['identical']:.1%}")
    return 0


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences")
    ap.add_argument("--reps", type=positive_int, default=15, help="timed passes of each search (the median is kept)")
    return run_or_say("one_beam.py", run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
