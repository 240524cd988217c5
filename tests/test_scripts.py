"""Every script kept beside a result (results/**/*.py) or in tools/ still runs against the package as it is now: each imports
(so every name it takes from `annotated_transformer` exists), and each, run as `python SCRIPT --help`, prints its usage and exits 0
(no traceback), so a rename cannot break a result's recipe unseen."""
import importlib.util, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted({*ROOT.glob("results/**/*.py"), *ROOT.glob("tools/*.py")})
COMMAND_SCRIPTS = ["tools/chart_study.py", "tools/evalb_check.py", "tools/parsing_study.py"]  # a command line read by hand, not argparse

def test_there_are_scripts():
    assert ROOT / "results/multi30k-rnn/evaluate.py" in SCRIPTS and ROOT / "tools/build_docs.py" in SCRIPTS

@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_imports(script, monkeypatch):
    "Import it as a module (not `__main__`: nothing runs), from its own folder as `python script.py` would find its neighbours."
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))

def run_script(script: Path, *args: str) -> subprocess.CompletedProcess:
    "`python SCRIPT ARGS...` from the repository root, one thread (the import of torch alone can take a while on a shared CPU)."
    return subprocess.run([sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})

def check_help(script: Path) -> None:
    "`python SCRIPT --help` (and `-h` for the scripts that read their command line by hand): exit 0, the usage on stdout, no traceback."
    for flag in ("--help", "-h") if str(script).endswith(tuple(COMMAND_SCRIPTS)) else ("--help",):
        r = run_script(script, flag)
        said = f"{script} {flag}: exit {r.returncode}\n{r.stdout[-1000:]}{r.stderr[-2000:]}"
        assert "Traceback" not in r.stdout + r.stderr, said
        assert r.returncode == 0 and r.stdout.strip(), said
        if "argparse" in script.read_text(encoding="utf-8"): assert r.stdout.startswith("usage:"), said

@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_help(script):
    check_help(script)

@pytest.mark.parametrize("script", COMMAND_SCRIPTS)
@pytest.mark.parametrize("args", [[], ["no-such-command"]], ids=["no-argument", "unknown"])
def test_script_bad_command_line(script, args):
    "A script that takes a command (or a file) by hand: no argument, or an unknown one, is one line naming what was expected, the usage after it, exit 2."
    if script == "tools/evalb_check.py" and args: args = ["--no-such-option"]  # its one argument is a file name: any name is a command
    r = run_script(ROOT / script, *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 2, r.stdout[-1000:] + r.stderr[-2000:]
    assert lines[0].startswith(Path(script).name) and "expected" in lines[0] and lines[1].startswith("usage:"), r.stderr

@pytest.mark.parametrize("args, code, says", [(["--seeds", "0"], 2, "--seeds: expected at least 1"),
                                              (["--jobs", "-1"], 2, "--jobs: expected at least 1"),
                                              (["--out", "/proc/no/seeds.json"], 1, "--out /proc/no/seeds.json"),
                                              (["--out", "."], 1, "is a directory")])
def test_copy_seeds_refuses_bad_input_before_training(args, code, says, tmp_path):
    "tools/copy_seeds.py: a bad count or an output it cannot write is one line and an exit code, before any run starts."
    r = run_script(ROOT / "tools/copy_seeds.py", *args)
    assert r.returncode == code and "Traceback" not in r.stderr and says in r.stderr.strip().splitlines()[-1], r.stderr
