"README.md is generated from nbs/index.ipynb (tools/build_docs.py readme); it must not be stale."
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_up_to_date():
    r = subprocess.run([sys.executable, 'tools/build_docs.py', 'readme', '--check'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _sh_block_after(text: str, marker: str) -> str:
    "The first ```sh block after `marker` in the README."
    rest = text[text.index(marker):]
    start = rest.index('```sh\n') + len('```sh\n')
    return rest[start:rest.index('```', start)].strip()


def test_ci_runs_the_readmes_commands():
    "CI (.ci/run) and the GitHub workflow run the README's test command verbatim, and CI runs the slow set after it"
    readme = (ROOT/'README.md').read_text(encoding='utf-8')
    quick = _sh_block_after(readme, '**4. Run the tests**')
    slow = _sh_block_after(readme, 'Everything, slow runs included')
    assert 'nbdev_test' in quick and 'pytest' in quick and '--flags slow' in slow and '--slow' in slow
    ci = (ROOT/'.ci'/'run').read_text(encoding='utf-8')
    assert quick in ci.splitlines(), quick
    assert quick in (ROOT/'.github'/'workflows'/'test.yaml').read_text(encoding='utf-8')
    nb_slow, _ = slow.split(' && ')
    assert ci.index(quick) < ci.index('--flags slow') and nb_slow.split(' nbdev_test')[0] in ci and 'pytest -m slow' in ci
