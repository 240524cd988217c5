"tools/max_autotune.py: torch.compile's max-autotune mode beside its default on the trainer's step (32b); its record, bad arguments."
import os, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "max_autotune.py"


@pytest.fixture(scope="module")
def tool():
    "The tool as a module (its import sets nothing: it compiles from cold inside `cold_inductor` only)."
    sys.path.insert(0, str(REPO / "tools"))
    import max_autotune
    return max_autotune


def run_tool(*args, env=None):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, says", [(["--reps", "0"], "--reps: 0 is less than 1"),
                                        (["--out", "a/x.json"], "--out: 'a/x.json': expected a file name ending in .json"),
                                        (["--presets", "huge"], "--presets: invalid choice: 'huge'"),
                                        (["--batch-size", "-3"], "--batch-size: -3 is less than 1")])
def test_bad_arguments_are_one_line(args, says):
    r = run_tool(*args)
    assert r.returncode == 2 and says in r.stderr and not r.stdout and "Traceback" not in r.stderr


def test_bf16_without_native_bf16_is_one_line_and_writes_nothing():
    r = run_tool("--presets", "tiny", "--precisions", "bf16", "--reps", "1", "--out", "never.json",
                 env={"AT_CPU_FLAGS": "fpu sse sse2 avx avx2 fma"})
    assert r.returncode == 1 and "--precisions bf16: this CPU has none of" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (REPO / "results" / "bench" / "never.json").exists()


def test_each_variant_compiles_in_its_mode(tool, monkeypatch):
    calls = []
    fake = lambda net, **kw: calls.append(kw) or net  # no compiling: the modes handed over are what is checked
    monkeypatch.setattr(torch, "compile", fake)
    cfg = tool.bench_config("tiny")
    batch = tool.random_padded_batch(cfg, 2, 6)
    model, _ = tool.make_pair(cfg, "cpu")
    for name, mode in tool.MODES.items():
        calls.clear(); tool.fast_step(model, batch, "fp32", mode)()
        assert calls == ([] if mode is None else [{"mode": mode}]), name


def test_the_record_holds_each_variant_and_its_ratios(tool, monkeypatch):
    import torch._inductor.config as ic
    cold = []  # at each compile: whether inductor's cache of graphs was off (the run compiles from cold)
    monkeypatch.setattr(torch, "compile", lambda net, **kw: cold.append(not ic.fx_graph_cache) or net)  # no minutes
    monkeypatch.setattr(tool, "keep_freed_memory", lambda: True)  # malloc as this test process has it
    got = {}
    monkeypatch.setattr(tool, "write", lambda res, name: got.update(res=res, name=name))
    assert tool.main(["--presets", "tiny", "--precisions", "fp32", "--reps", "2", "--out", "t.json"]) == 0
    res = got["res"]
    assert got["name"] == "t.json" and res["command"].endswith("--presets tiny --precisions fp32 --reps 2 --out t.json")
    assert res["settings"]["cpu"] and res["reps"] == 2
    r = res["results"]["tiny"]["fp32"]
    assert set(r["step_s"]) == set(r["first_call_s"]) == set(tool.MODES) and all(len(v) == 2 for v in r["times"].values())
    assert r["speed_over_eager"]["eager"] == 1.0
    assert r["max_autotune_over_default"] == pytest.approx(r["step_s"]["default"] / r["step_s"]["max-autotune"])
    assert r["speed_over_eager"]["default"] == pytest.approx(r["step_s"]["eager"] / r["step_s"]["default"])
    assert cold == [True, True] and ic.fx_graph_cache  # both compiled variants, and the setting back afterwards
