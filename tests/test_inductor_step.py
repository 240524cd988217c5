"tools/inductor_step.py: inductor's fused kernels for our decoding step, as a trial (33); its record, bad arguments."
import os, subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import inductor_step  # noqa: E402
from annotated_transformer.training.data import default_data_dir  # noqa: E402
from annotated_transformer.training.decode import DecoderState  # noqa: E402

TEST2016 = default_data_dir() / "multi30k" / "test_2016_flickr.de.gz"
MODEL = REPO / "pretrained" / "multi30k-de-en"
TOOL = str(REPO / "tools" / "inductor_step.py")
needs_data = pytest.mark.skipif(not TEST2016.is_file(), reason="no Multi30k test2016 in the data folder")


@pytest.mark.parametrize("args, says", [
    (["--reps", "0"], "--reps: 0 is less than 1"),
    (["--threads", "-1"], "--threads: -1 is less than 1"),
    (["--out", "a/x.json"], "--out: 'a/x.json': expected a file name ending in .json"),
    (["--data-dir", "/nowhere"], "/nowhere/multi30k/test_2016_flickr.de.gz")])
def test_bad_arguments_are_one_line(args, says):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    assert r.returncode in (1, 2) and says in r.stderr and not r.stdout and "Traceback" not in r.stderr


def test_each_compiled_variant_gets_dynamic_shapes_and_its_own_options():
    seen = []
    def compile_fn(fn, **kw):
        seen.append(kw); return fn
    decs = inductor_step.decoders("served", "plain", compile_fn)
    assert list(decs) == ["served", "plain_modules", *inductor_step.SETTINGS]
    assert decs["served"] == ("served", None) and decs["plain_modules"] == ("plain", inductor_step.model_step)
    assert seen == [dict(dynamic=True, options=o) for o in inductor_step.SETTINGS.values()]
    assert seen[1]["options"]["cpp_wrapper"] is True and "guard_filter_fn" in seen[1]["options"]


@pytest.fixture(scope="module")
def translators():
    return inductor_step.translators(MODEL)


@needs_data
def test_the_step_function_decodes_as_the_search_s_own_step_and_stepping_puts_the_step_back(translators):
    """Every cached step through `model_step` translates as the plain model's own `DecoderState.step` does (the same
    modules, so on any CPU; the served translator's packed products may break a near-tie otherwise elsewhere);
    `DecoderState.step` is the class's own again afterwards, and after an error inside."""
    _, plain = translators
    lines = inductor_step.test2016_batches(None, 32)
    calls, orig = [], DecoderState.step
    def step_fn(*a):
        calls.append(a[-1]); return inductor_step.model_step(*a)
    for beam in (1, 4):
        calls.clear()
        got = inductor_step.one_pass(plain, step_fn, lines, beam)
        assert got == inductor_step.one_pass(plain, None, lines, beam)
        assert DecoderState.step is orig and calls[0] == 0 and max(calls) > 5  # from the first step on
    with pytest.raises(ZeroDivisionError):
        with inductor_step.stepping(step_fn): 1 / 0
    assert DecoderState.step is orig


@needs_data
def test_the_record_s_ratios_and_agreement(translators, monkeypatch):
    _, plain = translators
    lines = inductor_step.test2016_batches(None, 32)
    # every decoder the plain model's modules (the compiled variants as the eager function), so that all translate
    # alike on any CPU
    decs = inductor_step.decoders(plain, plain, lambda fn, **kw: fn)
    r = inductor_step.measure(decs, lines, 1, 2)
    med = r["median_s"]
    assert set(med) == set(decs) and all(len(v) == 2 for v in r["wall_s"].values())
    for k in decs:
        assert r["speed_over_served"][k] == pytest.approx(med["served"] / med[k])
        assert r["speed_over_plain_modules"][k] == pytest.approx(med["plain_modules"] / med[k])
        assert r["identical_to_served"][k] == 1.0 and r["same_every_pass"][k]
        p = r["profile"][k]
        assert sum(p["groups_ms"].values()) == pytest.approx(p["total_ms"]) and len(p["top"]) == 10
        assert [t["ms"] for t in p["top"]] == sorted((t["ms"] for t in p["top"]), reverse=True)
    assert r["speed_over_served"]["served"] == 1.0
    # a translation that differs counts against agreement
    real = inductor_step.one_pass
    monkeypatch.setattr(inductor_step, "one_pass",
                        lambda tr, fn, ls, b: ["x"] + real(tr, fn, ls, b)[1:] if fn is not None else real(tr, fn, ls, b))
    r = inductor_step.measure(decs, lines, 1, 1)
    assert r["identical_to_served"]["plain_modules"] == pytest.approx(31 / 32) and r["identical_to_served"]["served"] == 1


@pytest.mark.parametrize("tool", ["inductor_step", "max_autotune"])
def test_importing_a_tool_that_compiles_from_cold_changes_no_environment(tool):
    """These tests import the tools into the test process, so an import that set inductor's variables would turn its
    caches off, or point them at a folder, for every later test that compiles."""
    code = (f"import os, sys, torch; sys.path.insert(0, {str(REPO / 'tools')!r}); before = dict(os.environ); "
            f"import {tool}; print(sorted(set(os.environ.items()) ^ set(before.items())))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}  # none inherited from here
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_cold_inductor_gives_an_empty_folder_and_no_graph_caches_and_puts_everything_back():
    import torch._functorch.config as fc
    import torch._inductor.config as ic
    from step_phases import cold_inductor
    before = (os.environ.get("TORCHINDUCTOR_CACHE_DIR"), ic.fx_graph_cache, fc.enable_autograd_cache)
    with cold_inductor():
        folder = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert folder.is_dir() and not any(folder.iterdir()) and str(folder) != before[0]
        assert ic.fx_graph_cache is False and fc.enable_autograd_cache is False
    assert not folder.exists()
    assert (os.environ.get("TORCHINDUCTOR_CACHE_DIR"), ic.fx_graph_cache, fc.enable_autograd_cache) == before


@needs_data
def test_a_run_compiles_from_cold_with_freezing_and_writes_its_record(monkeypatch):
    import torch._inductor.config as ic
    seen, got = [], {}
    def measure(decs, lines, beam, reps):  # what a search's passes would compile under, without minutes of compiling
        seen.append((beam, reps, len(lines), list(decs), ic.freezing, ic.fx_graph_cache)); return {"median_s": {}}
    monkeypatch.setattr(inductor_step, "measure", measure)
    monkeypatch.setattr(inductor_step, "write", lambda res, name: got.update(res=res, name=name))
    threads = torch.get_num_threads()
    try: assert inductor_step.main(["--sentences", "32", "--reps", "2", "--threads", "1", "--out", "t.json"]) == 0
    finally: torch.set_num_threads(threads)  # the tool sets it for its own process
    names = ["served", "plain_modules", *inductor_step.SETTINGS]
    assert seen == [(1, 2, 32, names, True, False), (4, 2, 32, names, True, False)]
    assert not ic.freezing and ic.fx_graph_cache  # both as they were
    res = got["res"]
    assert got["name"] == "t.json" and res["threads"] == 1 and set(res["searches"]) == {"greedy", "beam4"}
    assert res["compile_options"]["inductor_lean"]["guard_filter_fn"] == "skip_guard_on_all_nn_modules_unsafe"
