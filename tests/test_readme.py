"README.md is generated from nbs/index.ipynb (tools/build_docs.py readme); it must not be stale."
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_up_to_date():
    r = subprocess.run([sys.executable, 'tools/build_docs.py', 'readme', '--check'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
