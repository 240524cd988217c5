#!/usr/bin/env python
"""The first cell of every notebook: in Colab it fetches the book and installs its package; anywhere else it does nothing.

    python tools/colab_cell.py            # put the cell first in every notebook of nbs/ (or replace the one there)
    python tools/colab_cell.py --check    # exit 1 if a notebook does not start with exactly this cell
    python tools/colab_cell.py nbs/01_attention.ipynb ...   # only these notebooks

A notebook opened in Colab (the "Open in Colab" link at the top of each page) runs in /content, with neither the package
nor the notebook's folder: the cell clones the repository (settings.ini's `git_url` and `branch`), pip-installs it with the
nbdev tools the notebooks' test cells use (pinned as `dev_requirements` pins them), and moves into its `nbs/`, where the
notebooks read `../results/...` and import `_exercises`. The cell uses `__import__`, not `import`: nbdev's docs processing
executes every cell that contains an import statement, and this one has no business running there. Under `nbdev_test` and in
Jupyter it runs and does nothing. Every notebook holds the same text, written by this script; tests/test_notebook_links.py
checks it.
"""
from __future__ import annotations

import argparse, configparser, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NB_TOOLS = ('nbdev', 'fastcore', 'execnb', 'ghapi', 'fastgit')   # what the notebooks' hidden test cells need beyond the package


def settings(root: Path = ROOT) -> configparser.SectionProxy:
    cfg = configparser.ConfigParser(); cfg.read(root/'settings.ini')
    return cfg['DEFAULT']


def github(root: Path = ROOT) -> tuple[str, str, str]:
    "(user, repository, branch) of the book on GitHub, from settings.ini's git_url and branch"
    s = settings(root)
    m = re.fullmatch(r'https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?', s['git_url'])
    if not m: raise ValueError(f"settings.ini: git_url {s['git_url']!r} is not https://github.com/USER/REPO")
    return m.group(1), m.group(2), s.get('branch', 'main')


def colab_url(nb: Path, root: Path = ROOT) -> str:
    "The notebook, opened from GitHub in Colab"
    user, repo, branch = github(root)
    return f'https://colab.research.google.com/github/{user}/{repo}/blob/{branch}/{settings(root)["nbs_path"]}/{nb.name}'


def cell_source(root: Path = ROOT) -> str:
    s = settings(root)
    user, repo, branch = github(root)
    tools = [r for r in s['dev_requirements'].split() if re.match(r'[\w-]+', r).group(0) in NB_TOOLS]
    pip = ', '.join(json.dumps(r) for r in tools)
    return f'''#| hide
# In Colab: fetch the book, install its package and work from its {s["nbs_path"]}/ folder, as the notebooks expect. Elsewhere: nothing.
# (`__import__` rather than `import`: nbdev's docs build runs every cell that imports.)
if "google.colab" in __import__("sys").modules:
    os, subprocess, sys = map(__import__, ("os", "subprocess", "sys"))
    url, book = "https://github.com/{user}/{repo}", "/content/{repo}"
    if not os.path.isdir(book): subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "{branch}", url, book], check=True)
    tools = [{pip}]  # for the notebooks' test cells
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", book, *tools], check=True)
    os.chdir(f"{{book}}/{s["nbs_path"]}"); sys.path.insert(0, f"{{book}}/{s["nbs_path"]}")'''


def _src(c) -> str: return ''.join(c.get('source', ''))


def is_colab_cell(c) -> bool: return c.get('cell_type') == 'code' and 'google.colab' in _src(c) and _src(c).startswith('#| hide')


def has_cell(nb_path: Path, root: Path = ROOT) -> bool:
    cells = json.loads(nb_path.read_text(encoding='utf-8'))['cells']
    return bool(cells) and cells[0]['cell_type'] == 'code' and _src(cells[0]) == cell_source(root)


def put_first(nb_path: Path, root: Path = ROOT) -> bool:
    "Make the cell the notebook's first (replacing an older version of it); True if the file changed"
    nb = json.loads(nb_path.read_text(encoding='utf-8'))
    cells = nb['cells']
    old = next((c for c in cells if is_colab_cell(c)), None)
    if old is cells[0] and _src(old) == cell_source(root): return False
    if old is not None: cells.remove(old)
    cell = dict(cell_type='code', execution_count=None, id=(old or {}).get('id', 'colab-setup'), metadata={}, outputs=[],
                source=cell_source(root).splitlines(keepends=True))
    cells.insert(0, cell)
    nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    return True


def project_notebooks(root: Path = ROOT) -> list[Path]:
    sys.path.insert(0, str(root/'tools'))
    from book import is_project_notebook
    return sorted(p for p in (root/settings(root)['nbs_path']).glob('*.ipynb') if is_project_notebook(p))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('notebooks', nargs='*', type=Path, help='default: every notebook of nbs/')
    ap.add_argument('--check', action='store_true', help='only check; exit 1 if a notebook lacks the cell')
    a = ap.parse_args(argv)
    nbs = a.notebooks or project_notebooks()
    if a.check:
        bad = [p.name for p in nbs if not has_cell(p)]
        if bad: print(f'notebooks that do not start with the Colab cell: {bad}; run `python tools/colab_cell.py`', file=sys.stderr)
        return 1 if bad else 0
    changed = [p.name for p in nbs if put_first(p)]
    print(f'{len(changed)} notebook(s) changed' + (f': {changed}; now run nbdev_clean' if changed else ''))
    return 0


if __name__ == '__main__': sys.exit(main())
