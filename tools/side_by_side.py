"""Why our search gains less than CTranslate2's from a second worker (nbs/33_bench_suite.ipynb, *Decoding against
CTranslate2*): the shipped Multi30k translator on test2016, batch 32, greedy and beam 4, each decoder in a process of
its own and the passes alternated, as in the `ct2` benchmark. Ours runs on one thread, as two workers on one thread
each in one process (`translate_threads`, sharing Python's lock), and as two processes of one thread, each searching
every other batch at the same time (sharing no Python at all), both started before the timing; and, from this process,
`translate` with a pool of two processes forked for each pass, as a function that forks its workers per call would
do it. CTranslate2 fp32 runs on one thread and with two workers (inter_threads=2).

    python tools/side_by_side.py --out NAME.json

Writes results/bench/NAME.json (default side-by-side-<cpu>.json). Needs quiet cores: nothing else should run beside it.
"""
import multiprocessing, sys, tempfile, time
from pathlib import Path
import torch
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.bench.ctranslate2 import DecoderProcesses, export_ctranslate2
from annotated_transformer.engine.loading import load_model
from annotated_transformer.translation.inference import encode_sources, translate
from live_parity import positive_int  # tools/, beside this file
from step_phases import write
from step_products import ROWS, run_or_say, test2016, test2016_args

SEARCHES = {"greedy": 1, "beam": 4}  # name: beam size
_SEARCH = []  # in a forked worker: the search of the pass that forked it (inherited, never pickled)


def _start_worker(search): torch.set_num_threads(1); _SEARCH[:] = [search]


def _search_batch(idx: list[int]): return _SEARCH[0](idx)


def pool_per_call(search, batches):
    "`translate`'s `map_batches`: two processes forked from this one for this call, one torch thread each."
    with multiprocessing.get_context("fork").Pool(2, _start_worker, (search,)) as pool:
        yield from pool.imap(_search_batch, batches)


def halves(tok, lines: list[str], max_len: int) -> list[list[int]]:
    """The line numbers of every other batch, as `translate` forms its batches (sentences sorted longest first, 32 at
    a time): two halves of the same work, each searched in the same batches as in one search of all the lines."""
    srcs = encode_sources(tok, lines, max_len)
    order = sorted((i for i, s in enumerate(srcs) if s is not None), key=lambda i: -len(srcs[i]))
    batches = [order[s: s + ROWS] for s in range(0, len(order), ROWS)]
    return [[i for b in batches[k::2] for i in b] for k in (0, 1)]


def timed_pass(tr, one, two, lines: list[str], parts: list[list[int]], kw: dict) -> dict:
    "One pass of each decoder over `lines`: (translations, seconds)."
    out = {n: one.run(n, lines, **kw) for n in ("ours", "ct2_float32")}
    out.update({n: two.run(n, lines, **kw) for n in ("ours_workers", "ct2_float32_workers")})
    t = time.perf_counter()  # the two processes, started together; the pass ends when both have answered
    for n, part in zip(("ours", "ours_b"), parts): one.send(n, ([lines[i] for i in part], kw))
    got = [one.answer(n)[0] for n in ("ours", "ours_b")]
    seconds, merged = time.perf_counter() - t, [""] * len(lines)
    for part, hyps in zip(parts, got):
        for i, h in zip(part, hyps): merged[i] = h
    out["ours_processes"] = (merged, seconds)
    t = time.perf_counter(); hyps = translate(tr.model, tr.tokenizer, lines, map_batches=pool_per_call, **kw)
    out["ours_pool_per_call"] = (hyps, time.perf_counter() - t)
    return out


def run(a) -> int:
    src, lines = test2016(a.data_dir, "de", a.sentences)
    if len(lines) < 2 * ROWS:  # two batches at least, one for each process
        raise ValueError(f"{src}: {len(lines)} sentences read; two processes need two batches of {ROWS}, so at least "
                         f"{2 * ROWS} are needed (--sentences)")
    tr = load_model(a.checkpoint, "at-translate")
    max_len, parts = tr.model.cfg.max_len, halves(tr.tokenizer, lines, tr.model.cfg.max_len)
    res = dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
               sentences=len(lines), batch_size=ROWS, reps=a.reps, searches={})
    with tempfile.TemporaryDirectory() as tmp:
        d = export_ctranslate2(a.checkpoint, Path(tmp) / "ct2", force=True)
        one = DecoderProcesses({"ours": a.checkpoint, "ours_b": a.checkpoint, "ct2_float32": d}, 1, max_len)
        try:
            two = DecoderProcesses({"ours_workers": a.checkpoint, "ct2_float32_workers": d}, 2, max_len)
            try:
                for name, k in SEARCHES.items():
                    kw = dict(beam_size=k, alpha=0.6, batch_size=ROWS)
                    timed_pass(tr, one, two, lines[:2 * ROWS], halves(tr.tokenizer, lines[:2 * ROWS], max_len), kw)
                    secs, outs = {}, {}
                    for _ in range(a.reps):  # alternated, so that a change in the machine's load falls on all alike
                        for n, (hyps, s) in timed_pass(tr, one, two, lines, parts, kw).items():
                            outs[n] = hyps; secs.setdefault(n, []).append(s)
                    rate = {n: len(lines) / sorted(s)[len(s) // 2] for n, s in secs.items()}
                    same = lambda n: sum(x == y for x, y in zip(outs[n], outs["ours"])) / len(lines)
                    res["searches"][name] = dict(
                        beam_size=k, sentences_per_s=rate, seconds={n: sorted(s) for n, s in secs.items()},
                        identical_to_one_thread={n: same(n) for n in
                                                 ("ours_workers", "ours_processes", "ours_pool_per_call")},
                        ours_threads_gain=rate["ours_workers"] / rate["ours"],
                        ours_processes_gain=rate["ours_processes"] / rate["ours"],
                        ct2_gain=rate["ct2_float32_workers"] / rate["ct2_float32"],
                        processes_over_threads=rate["ours_processes"] / rate["ours_workers"],
                        pool_per_call_over_threads=rate["ours_pool_per_call"] / rate["ours_workers"])
            finally: two.close()
        finally: one.close()
    write(res, a.out or f"side-by-side-{res['settings']['cpu']['id'].replace(' ', '')}.json")
    for name, r in res["searches"].items():
        print(f"{name}: ours two threads {r['ours_threads_gain']:.2f}x its one thread, two processes "
              f"{r['ours_processes_gain']:.2f}x, a pool per call {r['pool_per_call_over_threads']:.2f}x two threads; "
              f"CTranslate2 two workers {r['ct2_gain']:.2f}x its one thread")
    return 0


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences")
    ap.add_argument("--reps", type=positive_int, default=5, help="timed passes of each decoder (the median is kept)")
    return run_or_say("side_by_side.py", run, ap.parse_args(argv), (OSError, ValueError, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
