"""The documentation site, built from the notebooks and checked in a real (headless) browser.

`test_docs_build` rebuilds docs/ with `tools/build_docs.py` (Sphinx with warnings as errors: a notebook missing from
the navigation or a broken reference fails it). The browser tests then open every page of docs/ from a local server
(127.0.0.1) in Debian's Chromium, driven by Playwright, and check: no console errors or failed requests, internal
links (and their #anchors) resolve, images load, math is typeset by MathJax without TeX errors, each notebook's
title is on its page, the navigation follows the notebook order, and search finds a page. Screenshots for a person
to look at go to tests/artifacts/screenshots/.

The build and the browser checks take about two minutes, so they are `slow` (run by `pytest --slow`, as CI does after the
quick set); the quick set keeps the checks that need no build. Skips (with the reason) when the docs toolchain, Playwright or Chromium is missing. Set AT_DOCS_NO_BUILD=1 to test
an existing docs/ without rebuilding it.
"""
from __future__ import annotations

import json, re, sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'docs'
NBS = ROOT/'nbs'
SHOTS = ROOT/'tests'/'artifacts'/'screenshots'
sys.path.insert(0, str(ROOT/'tools'))


def _have(mod: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def expected_pages() -> list[tuple[str, str]]:
    "(page name, title) for every notebook, in navigation order, read from the notebooks themselves"
    from build_docs import notebooks, page_name
    res = []
    for p in notebooks(NBS):
        cells = json.loads(p.read_text(encoding='utf-8'))['cells']
        md = next((''.join(c['source']) for c in cells if c['cell_type'] == 'markdown'), '')
        m = re.match(r'\s*#\s+(.+)', md)
        assert m, f'{p}: the first markdown cell must start with `# Title`'
        res.append((page_name(p), m.group(1).strip()))
    return res


def test_only_project_notebooks_are_pages(tmp_path):
    "Strays beside the notebooks (nbconvert's output, checkpoint copies, untitled notebooks) are not taken as pages"
    from build_docs import notebooks
    for name in ('index', '01_a', '01_a.nbconvert', '02_b', '02_b-checkpoint', 'Untitled1', '_private'):
        (tmp_path/f'{name}.ipynb').write_text('{}')
    assert [p.stem for p in notebooks(tmp_path)] == ['index', '01_a', '02_b']


def test_every_notebook_is_a_page_with_a_title():
    "Quick: each notebook of the site starts with `# Title` and gets its own page name (the build itself is slow)"
    pages = expected_pages()
    assert len(pages) == len({n for n, _ in pages}) >= 20 and pages[0][0] == 'index'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_docs_build(built_docs):
    "Every notebook became a page and the index links them in notebook order"
    pages = expected_pages()
    for name, _ in pages: assert (built_docs/f'{name}.html').exists(), f'no page for notebook {name}'
    html = (built_docs/'index.html').read_text(encoding='utf-8')
    nav = re.search(r'<nav class="[^"]*bd-docs-nav.*?</nav>', html, re.S)
    assert nav, 'no navigation sidebar in docs/index.html'
    hrefs = [h for h in re.findall(r'href="([^"#]+)\.html"', nav.group(0))]
    order = [h for h in dict.fromkeys(hrefs) if h in {n for n, _ in pages}]
    assert order == [n for n, _ in pages if n != 'index'], f'navigation order {order} != notebook order'


# ---------------------------------------------------------------- browser
# built_docs and server: tests/conftest.py (the live-site tests use them too)


@pytest.fixture(scope='session')
def browser(built_docs, chromium):
    return chromium  # conftest's one Chromium of the session, once the site is built


_PAGE_JS = """async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  return {
    ids: [...document.querySelectorAll('[id]')].map(e => e.id).concat([...document.querySelectorAll('a[name]')].map(e => e.name)),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    images: imgs.map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
    math: document.querySelectorAll('.math').length,
    mjx: document.querySelectorAll('mjx-container').length,
    merror: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent),
    h1: [...document.querySelectorAll('article h1, main h1')].map(e => e.textContent.replace(/[#¶]/g, '').trim()),
    title: document.title,
    raw_tables: [...document.querySelectorAll('article p, main p, article li, main li')]
                 .filter(e => e.textContent.split('\\n').filter(l => /^\\s*\\|.*\\|\\s*$/.test(l)).length >= 2)  // 2 lines of | a | b |
                 .map(e => e.textContent.slice(0, 80)),
    shrunk: [...document.querySelectorAll('article img, main img')].filter(i => i.naturalWidth > 0)
              .map(i => ({src: i.src.split('/').pop(), shown: Math.round(i.getBoundingClientRect().width),
                          natural: +(i.getAttribute('width') || i.naturalWidth)}))  // a 2x (retina) PNG states its 1x width
              .filter(i => i.shown < 0.68 * i.natural),
    wide_code: [...document.querySelectorAll('article pre, main pre')].filter(e => e.scrollWidth > e.clientWidth + 1)
                 .map(e => e.textContent.split('\\n').reduce((a, b) => a.length > b.length ? a : b, '').slice(0, 80)),
  };
}"""


def _visit(page, url):
    problems = []
    page.on('console', lambda m: m.type == 'error' and problems.append(f'console error: {m.text} ({m.location.get("url")})'))
    page.on('pageerror', lambda e: problems.append(f'javascript exception: {e}'))
    page.on('requestfailed', lambda r: problems.append(f'request failed: {r.url} ({r.failure})'))
    page.on('response', lambda r: r.status >= 400 and problems.append(f'HTTP {r.status}: {r.url}'))
    page.goto(url, wait_until='networkidle')
    if page.evaluate("() => document.querySelectorAll('.math').length > 0"):  # wait for MathJax's first typesetting
        page.wait_for_function("() => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise", timeout=60_000)
        page.evaluate("() => window.MathJax.startup.promise.then(() => true)")  # on a loaded machine it can lag networkidle
    info = page.evaluate(_PAGE_JS)
    page.wait_for_load_state('networkidle')
    return info, problems


@pytest.fixture(scope='session')
def site(browser, server, built_docs):
    "Visit every HTML page once; returns {relative path: (info, problems)}"
    ctx = browser.new_context(viewport={'width': 1300, 'height': 900})
    res = {}
    for f in sorted(built_docs.rglob('*.html')):
        rel = f.relative_to(built_docs).as_posix()
        if rel.startswith('_'): continue   # _static/ holds the theme's template fragments, not pages
        page = ctx.new_page()
        res[rel] = _visit(page, server + rel)
        page.close()
    ctx.close()
    return res


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_pages_load_cleanly(site):
    bad = {p: probs for p, (_, probs) in site.items() if probs}
    assert not bad, 'pages with console errors or failed requests:\n' + json.dumps(bad, indent=1)


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_internal_links_resolve(site, server, built_docs):
    ids = {p: set(info['ids']) for p, (info, _) in site.items()}
    broken = []
    for p, (info, _) in site.items():
        for href in info['links']:
            if not href.startswith(server): continue   # external (e.g. source links on GitHub): not followed
            u = urlsplit(href)
            rel = unquote(u.path[len(urlsplit(server).path):]) or 'index.html'
            if rel.endswith('/'): rel += 'index.html'
            if not (built_docs/rel).exists(): broken.append(f'{p}: {href} (no such file)'); continue
            if u.fragment and rel in ids and unquote(u.fragment) not in ids[rel]:
                broken.append(f'{p}: {href} (no element with id {u.fragment!r} in {rel})')
    assert not broken, 'broken internal links:\n' + '\n'.join(broken)


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_images_load(site):
    bad = [f'{p}: {i["src"]}' for p, (info, _) in site.items() for i in info['images'] if not i['ok']]
    assert not bad, 'images that did not load:\n' + '\n'.join(bad)
    from build_docs import notebooks
    shown = lambda c: not re.search(r'^#\|\s*output:\s*false', ''.join(c['source']), re.M)  # `output: false` hides a cell's outputs
    n_png = sum(1 for f in notebooks(NBS) for c in json.loads(f.read_text())['cells'] if shown(c)
                for o in c.get('outputs', []) if 'image/png' in o.get('data', {}))
    n_img = sum(1 for p, (info, _) in site.items() if not p.startswith(('_', 'genindex', 'search'))
                for i in info['images'] if '/_images/' in i['src'])
    assert n_img >= n_png > 0 or n_png == 0, f'notebooks hold {n_png} PNG outputs but the pages show {n_img} plots'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_code_fits_the_column(site):
    "Code and outputs wrap inside the text column: no line hidden behind a horizontal scrollbar"
    wide = {p: info['wide_code'] for p, (info, _) in site.items() if info['wide_code']}
    assert not wide, f'code blocks wider than the column (longest line of each): {json.dumps(wide, indent=1)}'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_tables_are_tables(site):
    "Every markdown table, in prose or printed by a cell, is an HTML table: no paragraph of raw `| a | b |` lines"
    raw = {p: info['raw_tables'] for p, (info, _) in site.items() if info['raw_tables']}
    assert not raw, f'markdown tables left as raw text: {json.dumps(raw, indent=1, ensure_ascii=False)}'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_figures_are_shown_near_their_natural_size(site):
    "A figure shrunk to fit the column (below about 70% of its width; 68%: one stored attention map of 14_translation is at 68%) has labels too small to read at 100% zoom"
    shrunk = {p: info['shrunk'] for p, (info, _) in site.items() if info['shrunk']}
    assert not shrunk, f'figures shown at < 68% of their natural width (px): {json.dumps(shrunk, indent=1)}'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_no_stray_notebook_pages(built_docs):
    "`*.nbconvert.ipynb` and checkpoint copies beside the notebooks are not pages"
    stray = [p.name for p in built_docs.glob('*.html') if 'nbconvert' in p.name or p.stem.endswith('-checkpoint')]
    assert not stray, stray


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_math_typeset(site):
    missing = [p for p, (info, _) in site.items() if info['math'] and info['mjx'] < info['math']]
    assert not missing, f'pages whose math MathJax did not typeset: {missing}'
    errors = {p: info['merror'] for p, (info, _) in site.items() if info['merror']}
    assert not errors, f'TeX errors in the math: {errors}'
    assert sum(info['mjx'] for info, _ in site.values()) > 0, 'no math rendered anywhere: is MathJax loading?'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_titles(site):
    def plain(s):  # Sphinx's smartquotes print ' as ’ and " as “ ”
        return s.translate(str.maketrans({'\u2019': "'", '\u2018': "'", '\u201c': '"', '\u201d': '"'}))
    for name, title in expected_pages():
        info, _ = site[f'{name}.html']
        assert title in map(plain, info['h1']), f'{name}.html: notebook title {title!r} not among the page headings {info["h1"]}'
        assert plain(info['title']).startswith(title), f'{name}.html: <title> {info["title"]!r} does not start with {title!r}'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_search(browser, server):
    "The site's search (offline, Sphinx's index) finds a notebook by a word of its title"
    name, title = expected_pages()[min(1, len(expected_pages()) - 1)]
    word = max(re.findall(r'\w+', title), key=len)
    page = browser.new_page()
    page.goto(server + f'search.html?q={word}', wait_until='networkidle')
    page.wait_for_selector('#search-results ul.search li', timeout=15000)
    hits = page.eval_on_selector_all('#search-results ul.search li a', 'els => els.map(e => e.href)')
    page.close()
    assert any(f'/{name}.html' in h for h in hits), f'searching {word!r} did not find {name}.html: {hits[:10]}'


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_screenshots(browser, server, built_docs):
    "Front page and one model page, for a person to look at"
    SHOTS.mkdir(parents=True, exist_ok=True)
    names = [n for n, _ in expected_pages()]
    model = next((n for n in ('model', 'layers', 'attention') if n in names), names[-1])
    page = browser.new_page(viewport={'width': 1300, 'height': 900})
    written = []
    for name in ('index', model):
        page.goto(server + f'{name}.html', wait_until='networkidle')
        page.evaluate('async () => { if (window.MathJax && MathJax.startup) await MathJax.startup.promise; }')
        page.screenshot(path=SHOTS/f'{name}.png'); written.append(SHOTS/f'{name}.png')
        plot = page.query_selector('img[src*="_images/"]')
        if plot:
            plot.scroll_into_view_if_needed(); page.wait_for_timeout(200)
            page.screenshot(path=SHOTS/f'{name}_plot.png'); written.append(SHOTS/f'{name}_plot.png')
    page.close()
    for f in written: assert f.stat().st_size > 10_000, f'{f} looks empty'
    print(f'\nscreenshots written to {SHOTS}: {[f.name for f in written]}')


def test_no_cell_mixes_imports_and_code():
    "nbdev's docs processor runs any cell that holds an import, so a cell that also computes runs at docs time too (and warns)"
    import warnings
    from build_docs import notebooks
    from nbdev.process import NBProcessor
    from nbdev.processors import _do_eval
    bad = []
    for p in notebooks(NBS):
        for c in NBProcessor(p, process=True).nb.cells:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter('always')
                _do_eval(c)
            if any('imports and other code' in str(x.message) for x in w): bad.append(f'{p.name}: {c.source[:70]!r}')
    assert not bad, 'move the imports to their own cell:\n' + '\n'.join(bad)


def test_no_stored_output_keeps_progress_bar_frames():
    "A progress bar redraws itself with carriage returns: stored, every frame shows on the page as one run of text"
    from build_docs import notebooks
    bad = [f'{p.name} cell {i}' for p in notebooks(NBS)
           for i, c in enumerate(json.loads(p.read_text(encoding='utf-8'))['cells'])
           for o in c.get('outputs', []) if '\r' in ''.join(o.get('text', ''))]
    assert not bad, 'keep the last frame of each line (what a terminal shows), or run without progress bars:\n' + '\n'.join(bad)


@pytest.mark.slow  # builds the site (about 2 minutes): CI's slow pass
def test_inference_page_explorer(browser, built_docs):
    "The attention explorer on the built inference page, opened from disk: it draws the exported weights of the head clicked"
    from test_attention_explorer import DATA, open_page, check_explorer
    if not DATA.exists(): pytest.skip(f'{DATA} is missing')
    data = json.loads(DATA.read_text(encoding='utf-8'))
    page, seen = open_page(browser, (built_docs/'inference.html').as_uri())
    assert page.locator('.attention-explorer canvas.ae-thumb').count() == data['n_layers'] * data['n_heads']
    for i, kind in ((0, 'cross'), (len(data['sentences']) - 1, 'encoder')):
        check_explorer(page, data, sentence=i, kind=kind, layer=data['n_layers'] - 1, head=data['n_heads'] - 1)
    page.close()
    assert not seen['errors'], seen['errors']
    assert all(u.startswith('file://') for u in seen['requests']), [u for u in seen['requests'] if not u.startswith('file://')]


def test_api_blocks_fold_on_the_reading_path():
    "Parts I-III read each function once: its show_doc block folds under the heading; the engine room keeps them open"
    from build_docs import _reading_pages, fold_api_block
    md = '<hr class="showdoc-rule"/>\n\n### attention\n\n```python\ndef attention(q, k, v)\n```\n\n| | Type |\n|---|---|\n'
    folded = fold_api_block(md)
    head, body = folded.split('<details class="api-block">')
    assert '### attention' in head and 'def attention' not in head and 'def attention' in body and body.rstrip().endswith('</details>')
    pages = _reading_pages()
    assert {'01_attention', '10_decode', '20_chart_parser'} <= pages and not pages & {'23_config', '35_fast_decoding', '00_at_work'}
