#!/usr/bin/env python
"""Build the documentation site and README.md from the notebooks, without Quarto.

    python tools/build_docs.py                  # site: nbs/*.ipynb -> docs/ (Sphinx, warnings are errors)
    python tools/build_docs.py readme           # README.md from nbs/index.ipynb
    python tools/build_docs.py readme --check   # exit 1 if README.md is stale

Route: nbdev's own processors (the ones `nbdev_preview` runs before Quarto: title block, `show_doc` cells for
exported symbols, hidden cells removed, doc links) -> a small conversion of each processed notebook to a plain
MyST notebook (Quarto-only syntax replaced) -> Sphinx + myst-nb + sphinx-book-theme, built with `-W`.
Pages are named like nbdev names them (`01_attention.ipynb` -> `attention.html`), so nbdev's doc links and
anchors (`attention.html#multiheadattention.forward`) are the same on this site and on the Quarto one.
The navigation is every `nbs/*.ipynb` in file order, `index` first; nothing to register by hand.
Under its title each page links its notebook twice: the site's own copy (docs/_notebooks/, so it works offline) to
download, and the notebook on GitHub opened in Colab; an exercise's unanswered check becomes an invitation to run it.
"""
from __future__ import annotations

import argparse, difflib, inspect, json, os, re, shutil, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT/'tools'))
import book  # noqa: E402  the book's one list of parts and pages (nbs/book.txt)
from book import is_project_notebook  # noqa: E402
import colab_cell  # noqa: E402  the notebooks' Colab set-up cell and their Colab addresses
CONF_DIR = ROOT/'docs_src'            # conf.py, _static, _templates (sources of the site, checked in)
GEN_DIR = ROOT/'build'/'docs_src'     # converted notebooks (generated, gitignored)
DOCTREES = ROOT/'build'/'doctrees'
HTML_DIR = ROOT/'build'/'html'        # Sphinx output (myst-nb writes its images next to it), copied to OUT_DIR
OUT_DIR = ROOT/'docs'                 # the built site (generated, gitignored except docs/README.md)
KEEP_IN_OUT = {'README.md'}

# the package imported by nbdev's processing must be this checkout's, not whatever is installed
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))


class DocsError(Exception): "A problem in the notebooks or the docs configuration, reported without a traceback"


# ---------------------------------------------------------------- nbdev processing
TITLES_FILE = GEN_DIR/'_page_titles.json'
_titles = None


def _pandoc_slug(s: str) -> str:
    """Heading id as Pandoc/Quarto make it (keeps `_`, `-`, `.`), which is what nbdev's doc links point at.
    Used by Sphinx (`myst_heading_slug_func`). Page titles get no slug, as in Quarto where the title is not a
    section: so on the page titled "Attention" the `attention` function's entry keeps the id `attention`."""
    global _titles
    if _titles is None: _titles = set(json.loads(TITLES_FILE.read_text())) if TITLES_FILE.exists() else set()
    if s in _titles: return ''
    s = re.sub(r'<[^>]+>|`', '', s).strip().lower()
    s = re.sub(r'[^\w\s.\-]', '', s)
    s = re.sub(r'\s+', '-', s)
    return re.sub(r'^[^a-z]+', '', s) or 'section'


def _fmt_anno(a) -> str:
    if a is inspect.Parameter.empty: return ''
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _table_cell(s) -> str: return str(s).replace('|', r'\|').replace('\n', ' ')


def _install_table_renderer():
    "Make `show_doc` render a signature, the docstring and a parameter table built from docments"
    import nbdev.showdoc as sd
    from fastcore.docments import docments, _fmt_default
    base = sd.BasicMarkdownRenderer

    class TableRenderer(base):
        def _signature(self):
            sym, nm = self.sym, self.nm
            try: sig = inspect.signature(sym)   # annotations as written (`Tensor | None`, not `torch.Tensor`)
            except (ValueError, TypeError): return f'{nm}(...)'
            params = list(sig.parameters.values())
            if params and params[0].name in ('self', 'cls') and not inspect.isclass(sym): params = params[1:]
            ps = []
            for p in params:
                pre = '*' if p.kind == p.VAR_POSITIONAL else '**' if p.kind == p.VAR_KEYWORD else ''
                a = _fmt_anno(p.annotation)
                d = '' if p.default is p.empty else '=' + _fmt_default(p.default)
                ps.append(f'{pre}{p.name}' + (f':{a}' if a else '') + d)
            ret = '' if sig.return_annotation is sig.empty else '->' + _fmt_anno(sig.return_annotation)
            kw = 'class' if inspect.isclass(sym) else 'def'
            one = f'{kw} {nm}({", ".join(ps)}){ret}'
            if len(one) <= 90 or not ps: return one
            return f'{kw} {nm}(\n' + ''.join(f'    {p},\n' for p in ps) + f'){ret}'

        def _table(self):
            try: dm = docments(self.sym, full=True)
            except Exception: return ''
            if not any(v.get('docment') for v in dm.values()): return ''
            rows = ['| | Type | Default | Details |', '|---|---|---|---|']
            for k, v in dm.items():
                if k in ('self', 'cls', 'return'): continue
                a, d = _fmt_anno(v.get('anno', inspect.Parameter.empty)), v.get('default', inspect.Parameter.empty)
                d = '' if d is inspect.Parameter.empty else f'`{_table_cell(_fmt_default(d))}`'
                rows.append(f'| **{k}** | ' + (f'`{_table_cell(a)}`' if a else '') + f' | {d} | {_table_cell(v.get("docment") or "")} |')
            r = dm.get('return')
            if r and (r.get('docment') or r.get('anno', inspect.Parameter.empty) not in (None, inspect.Parameter.empty)):
                a = _fmt_anno(r.get('anno', inspect.Parameter.empty))
                rows.append(f'| **Returns** | ' + (f'`{_table_cell(a)}`' if a else '') + f' | | {_table_cell(r.get("docment") or "")} |')
            return '\n'.join(rows)

        def _repr_markdown_(self):
            doc = '---\n\n'
            src = sd.NbdevLookup().code(self.fn)
            if src and src.endswith('#LNone'): src = src[:-len('#LNone')]  # nbdev found no line: link the file itself
            if src: doc += sd._ext_link(src, 'source', 'style="float:right; font-size:smaller"') + '\n\n'
            doc += f'{"#" * self.title_level} {self.nm}\n\n```python\n{self._signature()}\n```\n\n'
            if self.docs: doc += sd._ital_first(self.docs) if hasattr(sd, '_ital_first') else f'*{self.docs}*'
            tbl = self._table()
            if tbl: doc += '\n\n' + tbl
            return doc

    sd.BasicMarkdownRenderer = TableRenderer


def _install_local_doclinks():
    "Let nbdev's doc-link lookup see this checkout's `_modidx` even when the package is not pip-installed"
    import nbdev.doclinks as dl
    from importlib.metadata import EntryPoint
    from nbdev.config import get_config
    lib = get_config().lib_name
    real = dl.entry_points
    def entry_points(**kw):
        eps = [e for e in real(**kw) if e.name != lib]
        return eps + [EntryPoint(name=lib, value=f'{lib}._modidx:d', group='nbdev')]
    dl.entry_points = entry_points


_patched = False
def process_nb(path: Path):
    "Run nbdev's docs processors (what `nbdev_preview` does before Quarto) on one notebook; returns it in memory"
    global _patched
    from execnb.nbio import read_nb
    from nbdev.processors import FilterDefaults
    if not _patched:
        _install_table_renderer(); _install_local_doclinks(); _patched = True
    nb = read_nb(path)
    os.environ['IN_TEST'] = '1'
    cwd = os.getcwd()
    try:
        os.chdir(path.parent)  # notebooks run from nbs/, as under nbdev_test
        if str(path.parent) not in sys.path: sys.path.insert(0, str(path.parent))  # nbs/_exercises.py, as under nbdev_test
        FilterDefaults()(nb)
    except Exception as e: raise DocsError(f'{path}: nbdev processing failed: {e}') from e
    finally:
        os.chdir(cwd); os.environ.pop('IN_TEST', None)
    return nb


# ---------------------------------------------------------------- conversion to MyST notebooks
def notebooks(nbs_path: Path) -> list[Path]:
    """Every notebook of the site in navigation order: index first, then the book's order (nbs/book.txt) where the
    folder has that list, else file order (strays left out)"""
    nbs = sorted(p for p in nbs_path.glob('*.ipynb') if is_project_notebook(p))
    idx = [p for p in nbs if p.stem == 'index']
    if not idx: raise DocsError(f'{nbs_path}/index.ipynb is missing: it is the front page and the README')
    rest = [p for p in nbs if p.stem != 'index']
    if (nbs_path/'book.txt').exists():
        errs = book.check_list(nbs_path)
        if errs: raise DocsError('nbs/book.txt and the notebooks disagree: ' + '; '.join(errs))
        pos = {s: i for i, s in enumerate(book.order(nbs_path/'book.txt'))}
        rest.sort(key=lambda p: pos[p.stem])
    return idx + rest


def page_name(nb_path: Path) -> str:
    "nbdev's page name: `01_attention.ipynb` -> `attention` (same rule as nbdev's `_nbpath2html`)"
    return re.sub(r'^\d+[a-zA-Z0-9]*_', '', nb_path.stem)


_re_dir = re.compile(r'^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$')


def _split_directives(src: str):
    "Quarto/nbdev `#|` lines at the top of a code cell -> (dict, remaining source)"
    lines, d = src.splitlines(), {}
    while lines and (m := _re_dir.match(lines[0])):
        d[m.group(1)] = m.group(2).strip('"\''); lines.pop(0)
    return d, '\n'.join(lines)


BOOK_MARK = '<!-- book:contents -->'   # where the home page shows the book's table of pages
NOTEBOOKS_DIR = '_notebooks'   # the site's copies of the notebooks, which each page's "Download this notebook" fetches


def notebook_links(nb_path: Path) -> dict:
    "A page's two ways to run its notebook: the site's own copy of it (works offline) and the notebook opened in Colab"
    return dict(download=f'{NOTEBOOKS_DIR}/{nb_path.name}', colab=colab_cell.colab_url(nb_path))


def _links_html(nb_path: Path) -> str:
    l = notebook_links(nb_path)
    return (f'<div class="nb-links">'
            f'<a class="nb-link nb-download" href="{l["download"]}" download="{nb_path.name}">Download this notebook</a>'
            f'<a class="nb-link nb-colab" href="{l["colab"]}" target="_blank" rel="noopener">Open in Colab</a></div>')


_re_unanswered = re.compile(r'^✗ (.+?): not answered yet\b.*\n?', re.M)   # what `_exercises.check` prints before an answer


def _invitation_html(title: str, nb_path: Path) -> str:
    "In the docs, an exercise's check shows an invitation to run the notebook, not the ✗ a reader's own run shows first"
    l = notebook_links(nb_path)
    return (f'<p class="exercise-invite"><strong>{title}</strong>: your turn. Open this notebook '
            f'<a href="{l["colab"]}" target="_blank" rel="noopener">in Colab</a> or '
            f'<a href="{l["download"]}" download="{nb_path.name}">download it</a>, write the function above and run this check: '
            f'it tells you whether your answer is right.</p>')
_re_mdlink = re.compile(r'(\]\()([^)\s]+)(\))')
_re_attr_link = re.compile(r'\[([^\]]+)\]\(([^)\s]+)\)\{[^}]*\}')


def _reading_pages() -> set:
    "The pages of Parts I-III, where the code is read once: their API blocks fold"
    return {p for part in book.numbered_parts()[:3] for p in part.pages}


def fold_api_block(md: str) -> str:
    """A show_doc block folded under its heading: the `### name` heading stays (doc links point at its anchor), the
    signature, docstring and parameter table open from a "signature and parameters" line. The code above it on the page
    already shows the function; the engine room keeps its blocks open."""
    m = re.search(r'^###\s.+$', md, re.M)
    if not m or not md[m.end():].strip(): return md
    return (md[:m.end()] + '\n\n<details class="api-block"><summary>signature and parameters</summary>\n\n'
            + md[m.end():].strip() + '\n\n</details>\n')


class Converter:
    "Turn processed notebooks into MyST notebooks for Sphinx (or markdown for the README)"
    def __init__(self, nb_paths, cfg, readme=False):
        self.pages = {p.name: page_name(p) for p in nb_paths}
        self.readme = readme
        host = (cfg.get('doc_host', '') or '').rstrip('/') + '/' + (cfg.get('doc_baseurl', '/') or '/').strip('/')
        self.doc_host = host.rstrip('/') + '/'
        self.cfg = cfg

    def link(self, url: str, src: Path) -> str:
        base, _, anchor = url.partition('#')
        anchor = '#' + anchor if anchor else ''
        if base.startswith(self.doc_host) and base.endswith('.html'):   # nbdev doc link to our own site
            page = base[len(self.doc_host):-len('.html')]
            if self.readme: return url
            if page in self.pages.values(): return f'{page}.ipynb{anchor}'
            raise DocsError(f'{src}: doc link {url} points at no page of this site (pages: {sorted(self.pages.values())})')
        if '://' not in base and base.endswith('.ipynb') and '/' not in base:  # link to another notebook
            if base not in self.pages: return url   # left alone: Sphinx reports it as a broken reference
            if self.readme: return f'{self.cfg.nbs_path.name}/{base}{anchor}'
            return f'{self.pages[base]}.ipynb{anchor}'
        return url

    def markdown(self, md: str, src: Path) -> str:
        # pandoc attributes on links ({target="_blank" ...}) -> plain HTML link
        def _attr(m):
            txt, url = m.group(1), self.link(m.group(2), src)
            cls = ' class="showdoc-source"' if txt == 'source' else ''
            return f'<a href="{url}"{cls} target="_blank" rel="noopener">{txt}</a>'
        md = _re_attr_link.sub(_attr, md)
        return _re_mdlink.sub(lambda m: m.group(1) + self.link(m.group(2), src) + m.group(3), md)

    def showdoc_md(self, md: str, src: Path) -> str:
        md = self.markdown(md, src)
        if self.readme: return md
        if md.lstrip().startswith('---'): md = '<hr class="showdoc-rule"/>\n\n' + md.lstrip()[3:].lstrip()
        if src.stem in _reading_pages(): md = fold_api_block(md)
        return md

    def convert(self, nb, src: Path) -> dict:
        "Processed notebook -> nbformat-4 dict of plain MyST cells"
        fm = dict(getattr(nb, 'frontmatter_', None) or {})
        title = fm.get('title')
        if not title: raise DocsError(f'{src}: no title: the first cell must be a markdown cell `# Title` (and `> summary`)')
        cells = [dict(cell_type='markdown', metadata={}, source=f'# {title}' if self.readme else f'{{#page-{page_name(src)}}}\n# {title}')]
        if fm.get('description'):
            desc = self.markdown(fm['description'], src)
            cells.append(dict(cell_type='markdown', metadata={}, source=f'> {desc}' if self.readme else f'{{.lead}}\n{desc}'))
        if not self.readme: cells.append(dict(cell_type='markdown', metadata={}, source=_links_html(src)))
        for c in nb.cells:
            if 'source' not in c: continue   # removed by nbdev (hidden, exported plumbing)
            ct, s = c['cell_type'], c['source']
            if ct == 'raw':
                if s.lstrip().startswith('---'): continue   # Quarto front matter, already used above
                cells.append(dict(cell_type='raw', metadata={}, source=s)); continue
            if ct == 'markdown':
                if s.strip().startswith('<!-- WARNING: THIS FILE WAS AUTOGENERATED'): continue
                if BOOK_MARK in s: s = s.replace(BOOK_MARK, book.contents_md())   # the table of pages, from the list
                cells.append(dict(cell_type='markdown', metadata={}, source=self.markdown(s, src))); continue
            d, code = _split_directives(s)
            if d.get('include') == 'false': continue
            outputs = [dict(o) for o in c.get('outputs', [])]
            if d.get('output') == 'false': outputs = []
            if d.get('output') == 'asis' and d.get('echo') == 'false':   # show_doc and other markdown emitters
                for o in outputs:
                    md = o.get('data', {}).get('text/markdown')
                    if md is not None:
                        cells.append(dict(cell_type='markdown', metadata={}, source=self.showdoc_md(''.join(md), src)))
                continue
            tags = []
            if d.get('echo') == 'false': tags.append('remove-input')
            if not code.strip() and not outputs: continue
            for o in outputs:
                if 'data' in o and 'text/markdown' in o['data']:
                    o['data'] = {**o['data'], 'text/markdown': self.markdown(''.join(o['data']['text/markdown']), src)}
            invites = []
            if not self.readme:   # an exercise's unanswered check: the page invites the reader to run it instead
                for o in outputs:
                    if o.get('output_type') == 'stream' and o.get('name') == 'stdout':
                        text = ''.join(o.get('text', ''))
                        invites += _re_unanswered.findall(text)
                        o['text'] = _re_unanswered.sub('', text)
                outputs = [o for o in outputs if not (o.get('output_type') == 'stream' and not o['text'])]
            cell = dict(cell_type='code', metadata={'tags': tags} if tags else {}, source=code,
                        outputs=outputs, execution_count=c.get('execution_count'))
            cells.append(cell)
            cells += [dict(cell_type='markdown', metadata={}, source=_invitation_html(t, src)) for t in invites]
        for i, c in enumerate(cells): c['id'] = f'cell-{i}'
        meta = {k: v for k, v in dict(nb.metadata).items() if k in ('kernelspec', 'language_info')}
        meta.setdefault('kernelspec', {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'})
        meta.setdefault('language_info', {'name': 'python'})
        return dict(nbformat=4, nbformat_minor=5, metadata=meta, cells=cells)


def _jsonable(o):
    if isinstance(o, dict): return {k: _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)): return [_jsonable(v) for v in o]
    return o


def _toc_cell(nb_paths) -> dict:
    "The sidebar: one toctree per part of the book, captioned with the part's title"
    stems = {p.stem for p in nb_paths}
    if not (ROOT/'nbs'/'book.txt').exists() or not stems - {'index'} <= set(book.order()):
        entries = '\n'.join(page_name(p) for p in nb_paths if p.stem != 'index')
        src = f':::{{toctree}}\n:hidden:\n:maxdepth: 2\n:caption: Contents\n\n{entries}\n:::'
    else:
        src = '\n\n'.join(f':::{{toctree}}\n:hidden:\n:maxdepth: 2\n:caption: {part.title}\n\n'
                           + '\n'.join(page_name(Path(s)) for s in part.pages if s in stems) + '\n:::'
                           for part in book.parts())
    return dict(cell_type='markdown', metadata={}, id='toctree', source=src)


ATTENTION_DIR = ROOT/'results'/'attention'   # exported attention weights, drawn by _static/attention_explorer.js


def ship_attention(static: Path) -> list[Path]:
    """results/attention/NAME.json -> _static/attention/NAME.js, a script that sets window.ATTENTION_DATA[NAME]. A script,
    not a fetch of the JSON: browsers refuse fetch() on pages opened from disk, and the site must work there too."""
    out = []
    for f in sorted(ATTENTION_DIR.glob('*.json')):
        data = json.loads(f.read_text(encoding='utf-8'))  # a damaged file fails the build here, not in a reader's browser
        dst = static/'attention'/f'{f.stem}.js'
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text('window.ATTENTION_DATA = window.ATTENTION_DATA || {};\n'
                       f'window.ATTENTION_DATA[{json.dumps(f.stem)}] = {json.dumps(data, separators=(",", ":"))};\n', encoding='utf-8')
        out.append(dst)
    return out


LIVE_CACHE = ROOT/'build'/'live_models'   # ONNX exports, kept between builds while pretrained/ and the exporter are unchanged
ORT_DIST = ROOT/'node_modules'/'onnxruntime-web'/'dist'
ORT_FILES = ('ort.wasm.min.mjs', 'ort-wasm-simd-threaded.mjs', 'ort-wasm-simd-threaded.wasm')  # the wasm backend only
LIVE_MODELS = {'multi30k-de-en': 'German → English', 'multi30k-en-de': 'English → German', 'ptb-chart': 'the chart parser'}


def _file_entry(f: Path) -> dict:
    import gzip, hashlib
    b = f.read_bytes()
    return dict(name=f.name, bytes=len(b), gzip_bytes=len(gzip.compress(b, 6)), sha256=hashlib.sha256(b).hexdigest())


def _export_key() -> str:
    "What the exported files depend on: the shipped folders' MANIFESTs and the exporters' code"
    import hashlib
    h = hashlib.sha256()
    for name in sorted(LIVE_MODELS):
        m = ROOT/'pretrained'/name/'MANIFEST'
        h.update(m.read_bytes() if m.exists() else b'-')
    for mod in ('bench/onnx_export.py', 'bench/onnx_parser.py'):
        f = ROOT/'annotated_transformer'/mod
        h.update(f.read_bytes() if f.exists() else b'-')
    return h.hexdigest()[:16]


def ship_live(static: Path, quiet=False) -> dict:
    """The in-page models: onnxruntime-web's wasm backend (from node_modules, pinned by package-lock.json) into
    _static/ort/, the shipped models exported to ONNX by the package into _static/models/NAME/, and
    _static/models/index.json listing every file with its size (raw and gzip) and sha256, which the pages read."""
    missing = [f for f in ORT_FILES if not (ORT_DIST/f).exists()]
    if missing: raise DocsError(f'{ORT_DIST.relative_to(ROOT)} lacks {missing}: run `npm ci` in the repository first (package-lock.json pins onnxruntime-web)')
    ort_dir = static/'ort'
    ort_dir.mkdir(parents=True, exist_ok=True)
    for f in ORT_FILES: shutil.copy2(ORT_DIST/f, ort_dir/f)
    cache = LIVE_CACHE/_export_key()
    if not (cache/'done').exists():
        if LIVE_CACHE.exists(): shutil.rmtree(LIVE_CACHE)
        t0 = time.time()
        from annotated_transformer.bench.onnx_export import export_site_models
        export_site_models(cache, names=[n for n in LIVE_MODELS if n != 'ptb-chart'])
        from annotated_transformer.bench.onnx_parser import export_parser
        export_parser('ptb-chart', cache)
        (cache/'done').write_text(f'{time.time() - t0:.1f} s\n')
        if not quiet: print(f'exported the in-page models to ONNX in {time.time() - t0:.1f}s')
    index = dict(runtime=dict(module='ort.wasm.min.mjs', files=[_file_entry(ort_dir/f) for f in ORT_FILES]), models={})
    for name, title in LIVE_MODELS.items():
        src, dst = cache/name, static/'models'/name
        if dst.exists(): shutil.rmtree(dst)
        shutil.copytree(src, dst)
        index['models'][name] = dict(title=title, kind='parser' if name == 'ptb-chart' else 'translator',
                                     files=[_file_entry(f) for f in sorted(dst.iterdir()) if f.is_file()])
    (static/'models'/'index.json').write_text(json.dumps(index, indent=1), encoding='utf-8')
    return index


def ship_notebooks(nb_paths, dst: Path) -> list[Path]:
    "Each page's notebook, as stored (with the outputs of its real run), copied into the site for its download link"
    dst.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(p, dst/p.name)) for p in nb_paths]


def build_site(warnings_as_errors=True, quiet=False) -> float:
    from nbdev.config import get_config
    t0 = time.time()
    cfg = get_config()
    nb_paths = notebooks(cfg.nbs_path)
    names = [page_name(p) for p in nb_paths]
    dup = {n for n in names if names.count(n) > 1}
    if dup: raise DocsError(f'notebooks that map to the same page name: {sorted(dup)} ({[p.name for p in nb_paths]})')
    conv = Converter(nb_paths, cfg)
    if GEN_DIR.exists(): shutil.rmtree(GEN_DIR)
    GEN_DIR.mkdir(parents=True)
    titles = []
    for p in nb_paths:
        out = conv.convert(process_nb(p), p)
        titles.append(out['cells'][0]['source'].splitlines()[-1][2:])
        if p.stem == 'index': out['cells'].append(_toc_cell(nb_paths))
        (GEN_DIR/f'{page_name(p)}.ipynb').write_text(json.dumps(_jsonable(out), indent=1), encoding='utf-8')
        if not quiet: print(f'processed {p.relative_to(ROOT)} -> {page_name(p)}.html')
    TITLES_FILE.write_text(json.dumps(titles))
    t1 = time.time()
    from sphinx.cmd.build import build_main
    if HTML_DIR.exists(): shutil.rmtree(HTML_DIR)
    args = ['-b', 'html', '-c', str(CONF_DIR), '-d', str(DOCTREES), '-E', '--keep-going']
    if warnings_as_errors: args.append('-W')
    if quiet: args.append('-q')
    rc = build_main(args + [str(GEN_DIR), str(HTML_DIR)])
    if rc: raise DocsError(f'sphinx-build failed (exit {rc}); see the warnings above. build/docs_src/<page>.ipynb is '
                           f'generated from nbs/<NN_page>.ipynb; a location like `:390014` means cell 39, line 14.')
    ship_attention(HTML_DIR/'_static')
    ship_notebooks(nb_paths, HTML_DIR/NOTEBOOKS_DIR)
    ship_live(HTML_DIR/'_static', quiet)
    # replace the output folder's content, keeping its README
    OUT_DIR.mkdir(exist_ok=True)
    for f in OUT_DIR.iterdir():
        if f.name in KEEP_IN_OUT: continue
        shutil.rmtree(f) if f.is_dir() else f.unlink()
    shutil.copytree(HTML_DIR, OUT_DIR, dirs_exist_ok=True, ignore=shutil.ignore_patterns('.buildinfo', '.doctrees'))
    (OUT_DIR/'.nojekyll').touch()
    if not quiet: print(f'docs built in {OUT_DIR.relative_to(ROOT)}/ in {time.time()-t0:.1f}s '
                        f'(nbdev processing {t1-t0:.1f}s, sphinx {time.time()-t1:.1f}s); open docs/index.html')
    return time.time() - t0


# ---------------------------------------------------------------- README
def render_readme() -> tuple[str, dict]:
    "README.md text (and extracted images) from the processed nbs/index.ipynb"
    import nbformat
    from nbconvert import MarkdownExporter
    from nbdev.config import get_config
    cfg = get_config()
    idx = cfg.nbs_path/cfg.get('readme_nb', 'index.ipynb')
    if not idx.exists(): raise DocsError(f'{idx} is missing: README.md is generated from it')
    conv = Converter(notebooks(cfg.nbs_path), cfg, readme=True)
    nb = nbformat.reads(json.dumps(_jsonable(conv.convert(process_nb(idx), idx))), as_version=4)
    from traitlets.config import Config
    c = Config()  # honour the cell tags the converter sets from `#| echo: false` / `output: false`
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_input_tags = {'remove-input'}
    c.TagRemovePreprocessor.remove_all_outputs_tags = {'remove-output'}
    c.TagRemovePreprocessor.remove_cell_tags = {'remove-cell'}
    exp = MarkdownExporter(config=c)
    body, res = exp.from_notebook_node(nb, resources={'output_files_dir': 'README_files'})
    head = (f'<!-- Generated from {idx.relative_to(ROOT)} by tools/build_docs.py readme: edit the notebook, '
            f'not this file. -->\n\n')
    body = re.sub(r'\n{3,}', '\n\n', body).strip() + '\n'
    return head + body, res.get('outputs', {})


def readme(check=False) -> int:
    text, files = render_readme()
    dst = ROOT/'README.md'
    if check:
        old = dst.read_text(encoding='utf-8') if dst.exists() else ''
        stale = [n for n, b in files.items() if not (ROOT/n).exists() or (ROOT/n).read_bytes() != b]
        if old == text and not stale:
            print('README.md is up to date with nbs/index.ipynb'); return 0
        diff = ''.join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), 'README.md (committed)',
                                            'README.md (from nbs/index.ipynb)', n=1))
        print(diff[:4000] + (f'\nimages out of date: {stale}' if stale else ''))
        print('README.md is stale: it must be generated from nbs/index.ipynb. Run `python tools/build_docs.py readme` '
              '(or `make readme`) and commit the result.', file=sys.stderr)
        return 1
    dst.write_text(text, encoding='utf-8')
    for n, b in files.items():
        (ROOT/n).parent.mkdir(parents=True, exist_ok=True); (ROOT/n).write_bytes(b)
    print(f'wrote README.md' + (f' and {len(files)} image(s)' if files else ''))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('cmd', nargs='?', choices=['site', 'readme'], default='site',
                    help='site: build docs/ (default); readme: write README.md from nbs/index.ipynb')
    ap.add_argument('--check', action='store_true', help='readme: only check that README.md is up to date (exit 1 if stale)')
    ap.add_argument('--no-warnings-as-errors', action='store_true', help='site: let Sphinx warnings through (debugging only)')
    ap.add_argument('-q', '--quiet', action='store_true')
    a = ap.parse_args(argv)
    os.chdir(ROOT)   # nbdev finds settings.ini from the working directory
    try:
        if a.cmd == 'readme': return readme(a.check)
        if a.check: ap.error('--check goes with `readme`')
        build_site(not a.no_warnings_as_errors, a.quiet)
        return 0
    except DocsError as e:
        print(f'error: {e}', file=sys.stderr); return 1


if __name__ == '__main__': sys.exit(main())
