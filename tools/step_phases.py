"""Where a training step's time goes, phase by phase (`step_phases`, nbs/32b_op_profile.ipynb), for the presets the book
trains: copy, multi30k and base on random batches of the benchmarks' shapes, and ptb-chart on its own WSJ batches.

    OMP_NUM_THREADS=2 python tools/step_phases.py [--steps 8] [--precisions fp32 bf16] [--out NAME.json] [--keep-freed-memory]
    OMP_NUM_THREADS=2 python tools/step_phases.py --chart-ops [--steps 4]   # ptb-chart's operator groups (`chart_ops`)

Writes results/bench/phases-<cpu>-<threads>t.json (or --out: a name under results/bench/): for each preset and precision the
seconds of each phase, with the CPU named. With --chart-ops: results/bench/ops-ptb-chart-<cpu>-<threads>t.json, the
self time of each operator group per step of ptb-chart (`chart_ops`). Needs quiet cores: nothing else should run beside it.
"""
import argparse, json, os, sys, time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
import torch
from annotated_transformer.architecture.model import make_model
from annotated_transformer.bench.benchmarks import bench_config, random_padded_batch
from annotated_transformer.bench.bench_suite import DEFAULT_SHAPES, settings
from annotated_transformer.bench.op_profile import as_batch, seq2seq_phases, chart_phases, chart_ops
from annotated_transformer.engine.tasks import task_preset, build_chart_data
from annotated_transformer.engine.precision import keep_freed_memory
from annotated_transformer.training.data import atomic_write
from annotated_transformer.parsing.chart import ChartParser, ChartObjective
from live_parity import positive_int  # tools/, beside this file

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("AT_DATA_DIR", ROOT.parent / "shared" / "data"))


def out_name(s: str) -> str:
    "An argparse type: a plain .json file name (it is written under results/bench/)"
    if not s.endswith(".json") or Path(s).name != s or s.startswith("."):
        raise argparse.ArgumentTypeError(f"{s!r}: expected a file name ending in .json, without a folder")
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=positive_int, default=8, help="timed steps per preset and precision (after one untimed)")
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    ap.add_argument("--presets", nargs="+", choices=["copy", "multi30k", "base", "ptb-chart"],
                    default=["copy", "multi30k", "base", "ptb-chart"])
    ap.add_argument("--out", type=out_name, help="file name under results/bench/")
    ap.add_argument("--chart-ops", action="store_true", help="ptb-chart's operator groups, not the presets' phases")
    ap.add_argument("--keep-freed-memory", action="store_true",
                    help="malloc keeps freed memory, as the trainer has it (`keep_freed_memory`); default: as it starts")
    return one_line_errors("step_phases.py", run, ap.parse_args(argv), argv)


def one_line_errors(script: str, run, a, argv) -> int:
    "`run(a, argv)`, with a missing WSJ folder (AT_DATA_DIR) or too few batches said in one line, exit 1."
    try: return run(a, argv)
    except (OSError, ValueError) as e:
        print(f"{script}: {e or type(e).__name__}", file=sys.stderr)
        return 1


def run(a, argv) -> int:
    torch.manual_seed(0)
    if a.keep_freed_memory and not keep_freed_memory():
        raise ValueError("--keep-freed-memory: this C library is not glibc, or AT_KEEP_FREED_MEMORY=0")
    st = settings("cpu")
    res = dict(command="python tools/step_phases.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               settings=st, steps=a.steps, results={})
    cpu = st["cpu"]["model"].lower().replace(" ", "-")
    if a.chart_ops:
        data, batches = chart_batches(a.steps + 1)
        model, obj = ChartParser(data.model_config), ChartObjective(data.tokenizer, data.model_config.loss)
        res["results"]["ptb-chart"] = {p: chart_ops(model, obj, batches, p) for p in a.precisions}
        write(res, a.out or f"ops-ptb-chart-{cpu}-{torch.get_num_threads()}t.json")
        return 0
    for name in a.presets:
        t0 = time.perf_counter()
        if name == "ptb-chart":
            data, batches = chart_batches(a.steps + 1)
            model, phases = ChartParser(data.model_config), chart_phases
            shape = dict(max_tokens=task_preset("ptb-chart")[1].max_tokens, words=[int(b.lengths.sum()) for b in batches])
        else:
            cfg = bench_config(name)
            B, S = DEFAULT_SHAPES[("cpu", name)]
            batches = [as_batch(random_padded_batch(cfg, B, S, seed=k)) for k in range(a.steps + 1)]
            model, phases = make_model(cfg), seq2seq_phases
            shape = dict(batch_size=B, src_len=S, tgt_len=S)
        res["results"][name] = dict(shape=shape, **{p: phases(model, batches, p) for p in a.precisions})
        r = res["results"][name]
        print(name, " ".join(f"{p} {r[p]['step_s']:.3f} s/step" for p in a.precisions),
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    write(res, a.out or f"phases-{cpu}-{torch.get_num_threads()}t.json")
    return 0


def chart_batches(n: int, n_layers: int | None = None):
    "The ptb-chart preset's data (WSJ) and its first n training batches; `n_layers`: the encoder's, if not the preset's."
    mcfg, tcfg, spec = task_preset("ptb-chart")
    if n_layers: mcfg = replace(mcfg, n_layers=n_layers)
    data = build_chart_data(replace(spec, data_dir=str(DATA)), mcfg, tcfg)
    it, batches = iter(data.train), []
    for _ in range(n):
        b = next(it, None)
        if b is None: raise ValueError(f"{n} batches asked for, the training trees give {len(batches)}: lower --steps")
        batches.append(b)
    return data, batches


def write(res: dict, name: str):
    "`res` as JSON in results/bench/`name`, whole or not at all."
    out = ROOT / "results" / "bench" / name
    atomic_write(out, json.dumps(res, indent=1) + "\n")
    print("wrote", out)


@contextmanager
def cold_inductor():
    """Inside, every compile starts cold, as a user's first run does: inductor's caches of compiled graphs are off and
    its cache folder is a new empty one, removed on leaving (it still reuses a C++ kernel already built inside). The
    environment and inductor's settings are as they were afterwards, so importing a tool that uses it changes nothing."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils
    fresh = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache  # older PyTorch's name
    with (fresh(), inductor_config.patch(fx_graph_cache=False),
          functorch_config.patch(enable_autograd_cache=False)):
        yield


if __name__ == "__main__":
    sys.exit(main())
