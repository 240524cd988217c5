"""tools/held_to_avx2.py: the variables that hold a CPU's libraries to AVX2 and hide native bf16 from `auto`, and a
command run under them."""
import importlib.util, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "held_to_avx2.py"
spec = importlib.util.spec_from_file_location("_held_to_avx2", TOOL)
held = importlib.util.module_from_spec(spec); spec.loader.exec_module(held)

ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni\n"
SPR = "flags\t\t: fpu avx avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"

def test_flags_lose_avx512_and_amx_and_the_libraries_are_held():
    for text, kept in ((ZEN4, "fpu sse2 avx avx2 fma"), (SPR, "fpu avx avx2 fma")):
        env = held.held_env(text)
        assert env["AT_CPU_FLAGS"] == kept
        assert {k: env[k] for k in held.HELD} == dict(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2",
                                                      MKL_ENABLE_INSTRUCTIONS="AVX2", CT2_FORCE_CPU_ISA="AVX2")

def test_a_cpu_it_cannot_hold_is_named():
    with pytest.raises(ValueError, match="not an x86 CPU"): held.held_env("processor\t: 0\nFeatures\t: fp asimd\n")
    with pytest.raises(ValueError, match="no avx2 flag"): held.held_env("flags\t\t: fpu sse2 avx\n")

def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)

def test_no_command_and_a_missing_one_are_one_line_each():
    r = run()
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()] and "expected a command" in r.stderr
    r = run("")  # an empty name: the same line, not a traceback
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()] and "expected a command" in r.stderr
    r = run("no-such-command-here")
    assert r.returncode == 127 and "cannot run 'no-such-command-here'" in r.stderr.splitlines()[-1]

@pytest.mark.skipif(not (Path("/proc/cpuinfo").is_file() and " avx2" in Path("/proc/cpuinfo").read_text()),
                    reason="needs an x86 CPU with AVX2")
def test_the_command_runs_held_and_auto_sees_no_native_bf16():
    code = ("import torch; from annotated_transformer.engine.precision import resolve_precision; "
            "print(torch.backends.cpu.get_cpu_capability()); print(resolve_precision('auto', torch.device('cpu'))[0])")
    r = run(sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["AVX2", "fp32"]
