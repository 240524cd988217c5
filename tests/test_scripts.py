"""Every script kept beside a result (results/*/*.py) or in tools/ still runs against the package as it is now: each imports
(so every name it takes from `annotated_transformer` exists), and one that reads options with argparse answers `--help`."""
import importlib.util, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*ROOT.glob("results/*/*.py"), *ROOT.glob("tools/*.py")])

def test_there_are_scripts():
    assert ROOT / "results/multi30k-rnn/evaluate.py" in SCRIPTS and ROOT / "tools/build_docs.py" in SCRIPTS

@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_imports(script, monkeypatch):
    "Import it as a module (not `__main__`: nothing runs), from its own folder as `python script.py` would find its neighbours."
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))

@pytest.mark.parametrize("script", [s for s in SCRIPTS if "argparse" in s.read_text(encoding="utf-8")], ids=lambda p: str(p.relative_to(ROOT)))
def test_script_help(script):
    r = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("usage:"), r.stdout[-1000:] + r.stderr[-2000:]
