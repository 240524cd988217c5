"tools/inductor_step.py: inductor's fused kernels for our decoding step, as a trial (33); its record, bad arguments."
import subprocess, sys
from pathlib import Path
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import inductor_step  # noqa: E402
from annotated_transformer.engine.loading import load_model  # noqa: E402
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
    served, plain = load_model(MODEL, "at-translate"), load_model(MODEL, "at-translate", pack=False)
    inductor_step.pack_linears(plain.model.encoder)
    return served, plain


@needs_data
def test_the_step_function_decodes_as_served_and_stepping_puts_the_step_back(translators):
    """Every cached step through `model_step` (the plain model's modules) translates as the served translator does;
    `DecoderState.step` is the class's own again afterwards, and after an error inside."""
    served, plain = translators
    lines = inductor_step.test2016(None, "de", 32)[1]
    calls, orig = [], DecoderState.step
    def step_fn(*a):
        calls.append(a[-1]); return inductor_step.model_step(*a)
    for beam in (1, 4):
        calls.clear()
        got = inductor_step.one_pass(plain, step_fn, lines, beam)
        assert got == inductor_step.one_pass(served, None, lines, beam)
        assert DecoderState.step is orig and calls[0] == 0 and max(calls) > 5  # from the first step on
    with pytest.raises(ZeroDivisionError):
        with inductor_step.stepping(step_fn): 1 / 0
    assert DecoderState.step is orig


@needs_data
def test_the_record_s_ratios_and_agreement(translators, monkeypatch):
    served, plain = translators
    lines = inductor_step.test2016(None, "de", 32)[1]
    decs = inductor_step.decoders(served, plain, lambda fn, **kw: fn)  # the compiled variants as the eager function
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
