"""Run a command with every library held to AVX2 and no native bf16 in the flags `auto` reads: how this project
measures, on a CPU with AVX-512, what a CPU without native bf16 would run (nbs/32b_op_profile.ipynb, *Held to AVX2*).

    python tools/held_to_avx2.py at-bench --benchmarks compile --compile-threads 2 --reps 5 --out results/bench/X.json
    python tools/held_to_avx2.py python tools/chart_step_before_after.py --out X.json

Sets ATEN_CPU_CAPABILITY=avx2 (PyTorch's kernels and the C++ inductor writes), ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's
products), MKL_ENABLE_INSTRUCTIONS=AVX2, CT2_FORCE_CPU_ISA=AVX2 (CTranslate2), and AT_CPU_FLAGS to this CPU's flags
without the avx512* and amx* ones; a benchmark's record then says `isa: AVX2` and keeps those variables in its `env`.
The caches, memory and clocks stay this machine's.
"""
import os, sys
from pathlib import Path
from annotated_transformer.training.data import cpuinfo as cpuinfo_fields

HELD = dict(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2",
            CT2_FORCE_CPU_ISA="AVX2")


def held_env(cpuinfo: str) -> dict:
    "The variables to set, from the text of /proc/cpuinfo."
    line = cpuinfo_fields(cpuinfo).get("flags")  # the first processor's, as the package reads them
    if line is None: raise ValueError("no 'flags' line in /proc/cpuinfo: not an x86 CPU, nothing to hold to AVX2")
    flags = line.split()
    if "avx2" not in flags: raise ValueError("this CPU has no avx2 flag: it cannot run AVX2 kernels")
    return dict(HELD, AT_CPU_FLAGS=" ".join(f for f in flags if not f.startswith(("avx512", "amx"))))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]): print(__doc__.strip()); return 0
    if not argv or not argv[0].strip():  # nothing, or an empty name ("")
        print("held_to_avx2.py: expected a command to run, e.g. held_to_avx2.py at-bench --benchmarks compile",
              file=sys.stderr)
        return 2
    try: env = held_env(Path("/proc/cpuinfo").read_text())
    except (OSError, ValueError) as e:
        print(f"held_to_avx2.py: {e}", file=sys.stderr); return 2
    print("held_to_avx2.py: " + " ".join(f"{k}={v}" for k, v in env.items() if k != "AT_CPU_FLAGS")
          + " AT_CPU_FLAGS=<this CPU's flags without avx512* and amx*>", file=sys.stderr)
    try: os.execvpe(argv[0], argv, {**os.environ, **env})
    except OSError as e:
        print(f"held_to_avx2.py: cannot run {argv[0]!r}: {e.strerror}", file=sys.stderr); return 127


if __name__ == "__main__":
    sys.exit(main())
