"""`at-train copy` over several seeds, with the preset's cooldown and without it: the study behind the copy preset's
`cooldown_share` (29_tasks), read by 11_copy_task.

    python tools/copy_seeds.py --seeds 8 --jobs 2 --out results/copy-seeds/seeds.json

Each run is its own `at-train copy --seed S` process with one thread (OMP_NUM_THREADS=1), `--jobs` at a time; "without"
adds `--cooldown-share 0`. The file keeps each run's exact match on its validation sequences, its last logged loss, its
time, and the machine.
"""
from __future__ import annotations
import argparse, json, os, platform, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from annotated_transformer.commands.console import bad_file, check_output, check_output_dir, number

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"preset": [], "no_cooldown": ["--cooldown-share", "0"]}


def one(variant: str, seed: int, work: Path) -> dict:
    "One at-train copy run in its own process, one thread: its results.json's figures."
    run = work / f"{variant}-{seed}"
    cmd = ["at-train", "copy", "--run-dir", str(run), "--no-progress", "--seed", str(seed), *VARIANTS[variant]]
    p = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
    if p.returncode != 0: raise SystemExit(f"copy_seeds: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    r = json.loads((run / "results.json").read_text())
    return dict(variant=variant, seed=seed, exact_match=r["exact_match"], n_eval=r["n_eval"], final_loss=r["final_loss"],
                train_seconds=r["train_seconds"], hardware=r["hardware"], precision=r["precision"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=number(int, 1), default=8, help="seeds 0 .. N-1")
    ap.add_argument("--jobs", type=number(int, 1), default=2, help="runs at a time, one thread each")
    ap.add_argument("--out", type=Path, default=ROOT / "results/copy-seeds/seeds.json")
    a = ap.parse_args(argv)
    check_output_dir(ap, "--out", str(a.out.parent))  # before minutes of training, not after
    try: a.out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e: bad_file(ap, f"--out {a.out}: cannot make its directory ({e.strerror})")
    check_output(ap, "--out", str(a.out))
    t0, c0 = time.time(), os.times()
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(a.jobs) as ex:
        runs = list(ex.map(lambda vs: one(*vs, Path(d)), [(v, s) for v in VARIANTS for s in range(a.seeds)]))
    c1 = os.times()
    hw = runs[0]["hardware"]
    for r in runs: del r["hardware"]
    out = dict(command="python tools/copy_seeds.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               variants={k: "at-train copy --seed S " + " ".join(v) for k, v in VARIANTS.items()}, cpu=hw["cpu"],
               torch=hw["torch"], threads_per_run=1, jobs=a.jobs, wall_s=round(time.time() - t0, 1),
               cpu_s=round(c1.children_user + c1.children_system - c0.children_user - c0.children_system, 1),
               date=time.strftime("%Y-%m-%d"), python=platform.python_version(), runs=runs)
    tmp = a.out.with_suffix(".tmp"); tmp.write_text(json.dumps(out, indent=1) + "\n"); tmp.replace(a.out)
    for v in VARIANTS:
        ems = [r["exact_match"] for r in runs if r["variant"] == v]
        print(f"{v}: exact match {', '.join(f'{e:.3f}' for e in ems)}; {sum(e >= 0.99 for e in ems)} of {len(ems)} >= 0.99")
    print(f"wrote {a.out} ({out['wall_s']:.0f} s wall, {out['cpu_s']:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
