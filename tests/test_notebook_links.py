"""Every notebook one click away: each page of the site links its notebook (the site's own copy, to download) and the same
notebook opened in Colab, and each notebook starts with the cell that sets it up in Colab and does nothing elsewhere.

The quick tests check the links made for every page of nbs/book.txt (and the home page), the first cell of every notebook,
what that cell does with and without Colab (its commands recorded, nothing run), and the conversion that puts the links under a
page's title and turns an unanswered exercise's check into an invitation. The slow test reads the built site's HTML.
"""
from __future__ import annotations

import configparser, json, re, subprocess, sys, types, warnings
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
sys.path.insert(0, str(ROOT/'tools'))

import colab_cell  # noqa: E402
from build_docs import notebooks, page_name, notebook_links  # noqa: E402


def _settings():
    cfg = configparser.ConfigParser(); cfg.read(ROOT/'settings.ini')
    return cfg['DEFAULT']


def expected_colab(nb: Path) -> str:
    "Colab's address for a notebook on GitHub, written out from settings.ini here rather than taken from the code under test"
    s = _settings()
    user, repo = urlsplit(s['git_url']).path.strip('/').removesuffix('.git').split('/')
    return f'https://colab.research.google.com/github/{user}/{repo}/blob/{s["branch"]}/nbs/{nb.name}'


def test_every_page_links_its_notebook_and_colab():
    pages = notebooks(NBS)
    assert pages[0].stem == 'index' and len(pages) >= 20
    for p in pages:
        l = notebook_links(p)
        assert l['colab'] == expected_colab(p), (p.name, l['colab'])
        assert l['download'] == f'_notebooks/{p.name}', (p.name, l['download'])
    assert notebook_links(NBS/'01_attention.ipynb')['colab'] == \
        'https://colab.research.google.com/github/annotated-transformer/annotated_transformer/blob/main/nbs/01_attention.ipynb'


# ---------------------------------------------------------------- the first cell
def _cell0(p: Path) -> str: return ''.join(json.loads(p.read_text(encoding='utf-8'))['cells'][0]['source'])


def test_every_notebook_starts_with_the_colab_cell():
    want = colab_cell.cell_source()
    nbs = colab_cell.project_notebooks()
    assert {p.stem for p in notebooks(NBS)} <= {p.stem for p in nbs}
    bad = [p.name for p in nbs if _cell0(p) != want]
    assert not bad, f'notebooks whose first cell is not the Colab cell: {bad}; run `python tools/colab_cell.py` then nbdev_clean'


def test_the_colab_cell_is_hidden_and_not_run_by_the_docs_build():
    "Hidden in the docs; and nbdev's docs processing, which runs every cell holding an import, leaves it alone"
    from execnb.nbio import mk_cell
    from nbdev.processors import _do_eval
    src = colab_cell.cell_source()
    assert src.startswith('#| hide\n')
    s = _settings()
    assert s['git_url'] in src and f'"--branch", "{s["branch"]}"' in src
    assert not _do_eval(mk_cell(src)), 'nbdev would execute the Colab cell while building the docs'
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')   # nbdev warns of a cell that mixes imports and code: this probe does
        assert _do_eval(mk_cell('import sys\n' + src)), 'the probe: a cell that imports is executed'


def _run_cell(monkeypatch, colab: bool, cloned: bool = False):
    "Run the cell as Colab would (or not), recording the commands and the moves it makes instead of making them"
    calls, moves = [], []
    monkeypatch.setattr(subprocess, 'run', lambda cmd, **kw: calls.append((list(cmd), kw)))
    monkeypatch.setattr('os.chdir', lambda d: moves.append(d))
    monkeypatch.setattr('os.path.isdir', lambda d: cloned)
    monkeypatch.setattr(sys, 'path', list(sys.path))
    if colab: monkeypatch.setitem(sys.modules, 'google.colab', types.ModuleType('google.colab'))
    else: monkeypatch.delitem(sys.modules, 'google.colab', raising=False)
    ns = {}
    exec(compile(colab_cell.cell_source(), 'colab_cell', 'exec'), ns)
    return calls, moves, {k for k in ns if k != '__builtins__'}


def test_the_colab_cell_does_nothing_outside_colab(monkeypatch):
    calls, moves, names = _run_cell(monkeypatch, colab=False)
    assert (calls, moves, names) == ([], [], set())


def test_the_colab_cell_in_colab_clones_installs_and_moves_into_nbs(monkeypatch):
    s = _settings()
    book = f'/content/{s["repo"]}'
    calls, moves, _ = _run_cell(monkeypatch, colab=True)
    assert [c for c, _ in calls][0] == ['git', 'clone', '-q', '--depth', '1', '--branch', s['branch'], s['git_url'], book]
    pip = calls[1][0]
    assert pip[:6] == [sys.executable, '-m', 'pip', 'install', '-q', book], pip
    assert {re.match(r'[\w-]+', r).group(0) for r in pip[6:]} == {'nbdev', 'fastcore', 'execnb', 'ghapi', 'fastgit'}
    assert all(kw.get('check') for _, kw in calls), 'a failed clone or install must stop the notebook'
    assert moves == [f'{book}/nbs'] and sys.path[0] == f'{book}/nbs'   # where the notebooks read ../results and import _exercises
    calls, moves, _ = _run_cell(monkeypatch, colab=True, cloned=True)   # run again: the clone is there
    assert [c[0][:2] for c in calls] == [[sys.executable, '-m']] and moves == [f'{book}/nbs']


# ---------------------------------------------------------------- the conversion to pages
def _convert(cells, readme=False):
    import os
    from nbdev.config import get_config
    from build_docs import Converter
    cwd = os.getcwd(); os.chdir(ROOT)
    try: cfg = get_config()
    finally: os.chdir(cwd)
    nb = types.SimpleNamespace(frontmatter_=dict(title='Loss', description='The loss.'), cells=cells, metadata={})
    return Converter(notebooks(NBS), cfg, readme=readme).convert(nb, NBS/'09_loss.ipynb')['cells']


def _out(text): return dict(output_type='stream', name='stdout', text=text)


def test_links_go_under_the_title_and_an_unanswered_check_becomes_an_invitation():
    todo = '✗ Exercise 2: not answered yet: write the body of the function above, run its cell, then this one\n'
    cells = [dict(cell_type='markdown', source='Text.'),
             dict(cell_type='code', source='check("Exercise 2", lambda: f())', outputs=[_out(todo)]),
             dict(cell_type='code', source='check("Exercise 3", lambda: g())', outputs=[_out('before\n' + todo.replace('2', '3'))]),
             dict(cell_type='code', source='check("Exercise 4", lambda: h())', outputs=[_out('✓ Exercise 4: right\n')])]
    out = _convert(cells)
    assert [c['cell_type'] for c in out] == ['markdown'] * 4 + ['code', 'markdown', 'code', 'markdown', 'code']
    assert out[0]['source'].endswith('# Loss') and 'The loss.' in out[1]['source']
    links = out[2]['source']
    assert f'href="_notebooks/09_loss.ipynb" download="09_loss.ipynb">Download this notebook</a>' in links
    assert f'href="{expected_colab(NBS/"09_loss.ipynb")}"' in links and 'Open in Colab' in links
    assert out[4]['outputs'] == [], 'the ✗ of an unanswered check is not shown in the docs'
    for i, t in ((5, 'Exercise 2'), (7, 'Exercise 3')):
        inv = out[i]['source']
        assert inv.startswith('<p class="exercise-invite">') and f'<strong>{t}</strong>' in inv
        assert expected_colab(NBS/'09_loss.ipynb') in inv and '_notebooks/09_loss.ipynb' in inv and 'not answered' not in inv
    assert [''.join(o['text']) for o in out[6]['outputs']] == ['before\n'], 'other printed lines stay'
    assert [''.join(o['text']) for o in out[8]['outputs']] == ['✓ Exercise 4: right\n']
    readme = _convert(cells, readme=True)   # README.md: no links to the site's files, outputs as stored
    assert not any('nb-links' in c['source'] or 'exercise-invite' in c['source'] for c in readme)


# ---------------------------------------------------------------- the built site
def _exercise_checks(stem) -> int:
    cells = json.loads((NBS/f'{stem}.ipynb').read_text(encoding='utf-8'))['cells']
    return sum(1 for c in cells for o in c.get('outputs', []) if 'not answered yet' in ''.join(o.get('text', '')))


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_built_pages_link_their_notebooks(built_docs):
    n_invites = 0
    for p in notebooks(NBS):
        html = (built_docs/f'{page_name(p)}.html').read_text(encoding='utf-8')
        m = re.search(r'<div class="nb-links">(.*?)</div>', html, re.S)
        assert m, f'{page_name(p)}.html: no notebook links'
        h1, first_cell = html.find('<h1'), html.find('<div class="cell')
        assert 0 <= h1 < m.start() and (first_cell < 0 or m.start() < first_cell), f'{page_name(p)}.html: the links are not under the title'
        hrefs = dict((cls, href) for cls, href in re.findall(r'<a class="nb-link (nb-\w+)" href="([^"]+)"', m.group(1)))
        assert hrefs == {'nb-download': f'_notebooks/{p.name}', 'nb-colab': expected_colab(p)}, (p.name, hrefs)
        copy = built_docs/hrefs['nb-download']
        assert copy.is_file() and copy.read_bytes() == p.read_bytes(), f'{copy} is not a copy of {p}'
        assert 'not answered yet' not in html, f'{page_name(p)}.html shows an exercise as not answered'
        invites = re.findall(r'<p class="exercise-invite"><strong>(Exercise \d+)</strong>', html)
        assert len(invites) == _exercise_checks(p.stem), f'{page_name(p)}.html: invitations {invites}'
        n_invites += len(invites)
    assert n_invites >= 20, n_invites
