"""The book's one list (nbs/book.txt) and what is made from it: the sidebar's parts, the README's table of pages and every
page's closing "Next:" link; and the reading-path measures (words and cells from "Start reading" to the first
attention function and to the first trained model's output, and the engineering share of Parts I-II).

    python tools/book.py            # print the parts and the path measures
    python tools/book.py --fix      # rewrite each page's "Next:" cell from the list
    python tools/book.py --check    # exit 1 if a page's "Next:" cell disagrees with the list
"""
import argparse, json, re, sys
from dataclasses import dataclass, field
from pathlib import Path


def is_project_notebook(p: Path) -> bool:
    """A notebook of the project, not a stray: `jupyter nbconvert --execute` leaves `NAME.nbconvert.ipynb` beside the
    notebook, Jupyter keeps `NAME-checkpoint.ipynb` copies, editors leave `Untitled.ipynb`; none of them is a page."""
    return (not p.name.startswith(('_', '.')) and '.' not in p.stem and not p.stem.endswith('-checkpoint')
            and not p.stem.startswith('Untitled'))


ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
BOOK = NBS/'book.txt'
NEXT_RE = re.compile(r'^\*\*Next:\*\* ')
ENGINE_RE = re.compile(r'^##\s+Engine room\b', re.I)   # an H2 heading that opens a page's engineering section


@dataclass
class Part:
    title: str
    blurb: str
    pages: list = field(default_factory=list)


class BookError(Exception): pass


def parts(path: Path = BOOK) -> list:
    "The parts of the book, each with its pages (notebook stems) in reading order"
    res = []
    for i, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        line = line.strip()
        if not line or line.startswith('#'): continue
        if line.startswith('=='):
            title, _, blurb = line[2:].partition('|')
            res.append(Part(title.strip(), blurb.strip()))
        elif not res: raise BookError(f'{path}:{i}: page {line!r} comes before any part (`== Title | blurb`)')
        else: res[-1].pages.append(line)
    return res


def numbered_parts(path: Path = BOOK) -> list:
    "The book's numbered parts (`Part I`, `Part II`, ...), without the opening page that comes before them"
    return [p for p in parts(path) if p.title.startswith('Part ')]


def order(path: Path = BOOK) -> list:
    "Every page of the book in reading order"
    return [p for part in parts(path) for p in part.pages]


def check_list(nbs: Path = NBS) -> list:
    "Problems with the list: pages without notebooks, notebooks without a page, numbers out of reading order"
    pages, errs = order(nbs/'book.txt'), []
    on_disk = sorted(p.stem for p in nbs.glob('*.ipynb') if p.stem != 'index' and not p.stem.startswith(('_', '.'))
                     and '.' not in p.stem and not p.stem.endswith('-checkpoint'))
    errs += [f'{p}: listed in book.txt but nbs/{p}.ipynb does not exist' for p in pages if p not in on_disk]
    errs += [f'nbs/{p}.ipynb is in no part of book.txt' for p in on_disk if p not in pages]
    dup = {p for p in pages if pages.count(p) > 1}
    errs += [f'{p}: listed twice in book.txt' for p in sorted(dup)]
    if pages != sorted(pages): errs.append(f'book.txt is not in notebook-number order: the numbers must follow the reading order')
    return errs


def nb_json(stem: str, nbs: Path = NBS) -> dict: return json.loads((nbs/f'{stem}.ipynb').read_text(encoding='utf-8'))


def title(stem: str, nbs: Path = NBS) -> str:
    "A page's title: its first markdown cell's `# Title`"
    for c in nb_json(stem, nbs)['cells']:
        if c['cell_type'] == 'markdown':
            m = re.match(r'#\s+(.+)', ''.join(c['source']).strip())
            if m: return m.group(1).strip()
    raise BookError(f'nbs/{stem}.ipynb has no `# Title` cell')


def summary(stem: str, nbs: Path = NBS) -> str:
    "A page's one-line summary: the `> ...` line under its title"
    for c in nb_json(stem, nbs)['cells']:
        if c['cell_type'] == 'markdown':
            m = re.search(r'^>\s*(.+)$', ''.join(c['source']), re.M)
            return m.group(1).strip() if m else ''
    return ''


def part_of(stem: str) -> Part:
    for part in parts():
        if stem in part.pages: return part
    raise BookError(f'{stem} is in no part of book.txt')


def next_cell(stem: str, nbs: Path = NBS) -> str:
    "The closing cell of a page: a link to the next page of the list (or back to the start after the last page)"
    pages = order(nbs/'book.txt')
    i = pages.index(stem)
    if i + 1 == len(pages): return '**Next:** this is the last page. Back to [the start](index.ipynb).'
    nxt = pages[i + 1]
    here, there = part_of(stem), part_of(nxt)
    tail = f' — the first page of {there.title.split(" (")[0]}: {there.blurb}.' if here.title != there.title else '.'
    return f'**Next:** [{title(nxt, nbs)}]({nxt}.ipynb){tail}'


def _next_idx(cells) -> int | None:
    for i, c in enumerate(cells):
        if c['cell_type'] == 'markdown' and NEXT_RE.match(''.join(c['source'])): return i
    return None


def _insert_at(cells) -> int:
    "At the page's end: before its trailing hidden `nbdev_export()` cell if it has one"
    n = len(cells)
    while n and cells[n - 1]['cell_type'] == 'code' and 'nbdev_export(' in ''.join(cells[n - 1]['source']): n -= 1
    return n


def sync_next(fix: bool = False, nbs: Path = NBS) -> list:
    "Pages whose Next cell disagrees with the list; with `fix`, rewrite them"
    bad = []
    for stem in order(nbs/'book.txt'):
        path = nbs/f'{stem}.ipynb'
        nb = json.loads(path.read_text(encoding='utf-8'))
        want = next_cell(stem, nbs)
        i = _next_idx(nb['cells'])
        have = ''.join(nb['cells'][i]['source']) if i is not None else None
        if have == want and i == _insert_at(nb['cells'][:i] + nb['cells'][i + 1:]): continue
        bad.append(stem)
        if not fix: continue
        if i is not None: nb['cells'].pop(i)
        j = _insert_at(nb['cells'])
        nb['cells'].insert(j, dict(cell_type='markdown', metadata={}, source=want))
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    return bad


def contents_md(link=lambda stem: f'{stem}.ipynb') -> str:
    "The table of pages, part by part (the README's and the home page's)"
    out = []
    for part in parts():
        out.append(f'**{part.title}**: {part.blurb}.\n\n| page | what it shows |\n|---|---|')
        out += [f'| [{title(s)}]({link(s)}) | {summary(s).replace("|", "/")} |' for s in part.pages]
        out.append('')
    return '\n'.join(out).strip()


# ---------------------------------------------------------------- the reading path, measured
def _words(s: str) -> int: return len(re.sub(r'<[^>]+>|[`*#>|]', ' ', s).split())


def _visible(c) -> bool:
    "A cell a reader of the docs sees: markdown, or code that is not hidden"
    if c['cell_type'] != 'code': return c['cell_type'] == 'markdown'
    s = ''.join(c['source'])
    return not re.search(r'^#\|\s*(hide\b|export\s*$|exporti\b|include:\s*false)', s, re.M) or '#| exports' in s


def path_to(pred, nbs: Path = NBS, start_cells=None) -> dict:
    """Words (of prose: the markdown cells) and visible cells read from the home page's "Start reading" link along the
    book until the first cell for which `pred(stem, cell)` holds"""
    words, cells = 0, 0
    for stem, c in (start_cells or []):
        words += _words(''.join(c['source'])); cells += 1
    pages = order(nbs/'book.txt')
    if start_cells: pages = pages[pages.index(start_page(start_cells)):]
    for stem in pages:
        for c in nb_json(stem, nbs)['cells']:
            if not _visible(c): continue
            if pred(stem, c): return dict(page=stem, words=words, cells=cells)
            cells += 1
            if c['cell_type'] == 'markdown': words += _words(''.join(c['source']))
    raise BookError('the path never reaches the cell looked for')


def home_until_start(nbs: Path = NBS) -> list:
    "The home page's cells up to and including the one with the 'Start reading' link"
    out = []
    for c in nb_json('index', nbs)['cells']:
        if not _visible(c): continue
        out.append(('index', c))
        if 'Start reading' in ''.join(c['source']): return out
    raise BookError('nbs/index.ipynb has no "Start reading" link')


def start_page(start_cells) -> str:
    "The page the home page's 'Start reading' link opens"
    m = re.search(r'Start reading[^(]*\]\((\w+)\.ipynb', ''.join(start_cells[-1][1]['source']))
    if not m: raise BookError('the home page\'s "Start reading" is not a link to a page of the book')
    return m.group(1)


def is_attention_def(stem, c) -> bool:
    return c['cell_type'] == 'code' and re.search(r'^def attention\(', ''.join(c['source']), re.M) is not None


def is_trained_output(stem, c) -> bool:
    "The first code cell marked as showing a trained model's output (a `# first trained output` comment in it)"
    return c['cell_type'] == 'code' and '# trained model output' in ''.join(c['source'])


# What makes a cell of Parts I-II engineering or plumbing, read from its code, not from its heading: kernels and fused
# paths, caches, precision and CPU tricks, processes and resuming, memory and accumulation, checkpoints; file handling,
# downloads and recipe registries. A visible code cell that uses one of these is engineering, and so is the prose that
# introduces it (the markdown cell right before it); so is a visible cell that only demonstrates bad input being refused,
# and every cell under an "## Engine room" heading. Comments are
# not read (a comment naming a checkpoint is not one), and the directive lines `#| ...` neither.
ENGINEERING_CODE = re.compile(r"""
    scaled_dot_product_attention | \bsdpa | \bfused\b | \bforeach\b | torch\.compile | is_compiling
  | \bcache\b | \bstatic_kv\b | KVCache | \bis_causal\b
  | autocast | bfloat16 | \bbf16\b | \bamx | avx512 | cpuinfo | set_num_threads
  | \bworld_size\b | \brank\s*= | DistributedDataParallel | all_reduce | \bresume | set_epoch\([^)]*start
  | \bchunk | accum | VmHWM | max_memory | HiddenStates | SequenceObjective
  | checkpoint | torch\.save | torch\.load
  | \bgzip\b | sys\.stdin | urllib | \bdownload | atomic_write | register_recipe | \bRecipe\( | sha256
""", re.X | re.I)


def _code_only(s: str) -> str:
    "A cell's code without its comments (strings stay: a flag's value is code)"
    import io, tokenize
    try: return tokenize.untokenize(t for t in tokenize.generate_tokens(io.StringIO(s).readline) if t.type != tokenize.COMMENT)
    except (tokenize.TokenError, IndentationError, SyntaxError): return re.sub(r'(?m)^\s*#.*$', '', s)


def _bad_input_demo(code: str) -> bool:
    "A cell that only shows refusals of bad input (every statement a `test_fail`): plumbing, not the paper"
    lines = [l.strip() for l in code.splitlines() if l.strip() and not l.strip().startswith('#|')]
    return bool(lines) and all(l.startswith('test_fail(') for l in lines)


def engineering_cell(c) -> bool:
    """A visible code cell whose code (not its comments) does engineering or plumbing (see ENGINEERING_CODE), or only
    demonstrates refusals of bad input"""
    if c['cell_type'] != 'code' or not _visible(c): return False
    code = _code_only(''.join(c['source']))
    return ENGINEERING_CODE.search(code) is not None or _bad_input_demo(code)


def engineering_share(nbs: Path = NBS, n_parts: int = 2) -> dict:
    """Engineering and plumbing among the cells a docs reader sees on Parts I-II: every cell under an `## Engine room`
    heading (to the next H2 or the page's end), every visible code cell that does engineering by its code, and the
    markdown cell that introduces such a code cell"""
    eng = total = 0
    per_page, flagged = {}, {}
    for part in numbered_parts(nbs/'book.txt')[:n_parts]:
        for stem in part.pages:
            cells = [c for c in nb_json(stem, nbs)['cells'] if _visible(c)]
            inside, marks = False, []
            for c in cells:
                s = ''.join(c['source'])
                if c['cell_type'] == 'markdown' and re.match(r'^##\s', s.strip()): inside = bool(ENGINE_RE.match(s.strip()))
                marks.append(inside or engineering_cell(c))
            for i in range(len(cells) - 1):   # the prose right before an engineering code cell introduces it
                if cells[i]['cell_type'] == 'markdown' and cells[i + 1]['cell_type'] == 'code' and engineering_cell(cells[i + 1]):
                    marks[i] = True
            e = sum(marks)
            per_page[stem] = (e, len(cells)); eng += e; total += len(cells)
            flagged[stem] = [c.get('id') for c, m in zip(cells, marks) if m]
    return dict(engineering_cells=eng, cells=total, share=eng / total if total else 0.0, per_page=per_page, flagged=flagged)


# ---------------------------------------------------------------- the concept table
# The home page's table "The paper, idea by idea" links each idea of §3, §5 and §6.1 to the sections that teach it. Each
# idea must have, over its linked sections: the paper's words (a blockquote tagged §), the math (a $$ display), the code
# (an exported cell, or a visible function or class), a check (a test or assert, shown or hidden) and a picture (a stored
# image). `concept_gaps` names what is missing.
CONCEPTS_RE = re.compile(r'^### The paper, idea by idea', re.M)
PARTS_OF_A_LESSON = ('quote', 'math', 'code', 'check', 'picture')


def slug(heading: str) -> str:
    """The anchor a section heading gets on the site: Pandoc's rule, as tools/build_docs.py's `_pandoc_slug` gives it to
    Sphinx (lower case; all but letters, digits, `_`, `-`, `.` and spaces dropped; spaces to hyphens; nothing before the
    first letter)"""
    s = re.sub(r'^#+\s*', '', heading.strip().split('\n')[0])
    s = re.sub(r'<[^>]+>|`', '', s).strip().lower()
    s = re.sub(r'\s+', '-', re.sub(r'[^\w\s.\-]', '', s))
    return re.sub(r'^[^a-z]+', '', s) or 'section'


def section(stem: str, anchor: str, nbs: Path = NBS) -> list:
    """The cells of a page's section: from the H2 heading whose anchor is `anchor` to the next H1 or H2; with no anchor,
    the page's opening, from its title to its first H2"""
    cells, out = nb_json(stem, nbs)['cells'], None
    for c in cells:
        s = ''.join(c['source'])
        m = re.match(r'^(#{1,2})\s', s) if c['cell_type'] == 'markdown' else None
        if m and out is not None: break
        if m and out is None and (slug(s) == anchor if anchor else m.group(1) == '#'): out = []
        if out is not None: out.append(c)
    if out is None: raise BookError(f'{stem}: no section with the anchor #{anchor}' if anchor else f'{stem}: no title')
    return out


def lesson_parts(cells) -> set:
    "Which of quote, math, code, check and picture these cells hold"
    md = [''.join(c['source']) for c in cells if c['cell_type'] == 'markdown']
    code = [c for c in cells if c['cell_type'] == 'code']
    src = lambda c: ''.join(c['source'])
    has = dict(quote=any(re.search(r'^>\s*§\d', s, re.M) for s in md),
               math=any('$$' in s for s in md),
               code=any(re.search(r'^#\|\s*exports?\b', src(c), re.M) or (_visible(c) and re.search(r'^(def|class)\s', src(c), re.M))
                        for c in code),
               check=any(re.search(r'\b(test_eq|test_close|test_fail|assert)\b', src(c)) for c in code),
               picture=any('image/png' in o.get('data', {}) for c in code for o in c.get('outputs', [])))
    return {k for k, v in has.items() if v}


def concept_table(nbs: Path = NBS) -> dict:
    "The home page's concept table: {idea: [(page, anchor), ...]}"
    for c in nb_json('index', nbs)['cells']:
        s = ''.join(c['source'])
        if c['cell_type'] == 'markdown' and CONCEPTS_RE.search(s):
            rows = [l for l in s.splitlines() if l.startswith('|') and not re.match(r'^\|[-| ]+\|$', l)][1:]
            return {l.split('|')[1].strip(): re.findall(r'\]\((\w+)\.ipynb(?:#([\w.-]+))?\)', l) for l in rows}
    raise BookError('the home page has no "### The paper, idea by idea" table')


def concept_gaps(nbs: Path = NBS) -> dict:
    "{idea: [what its linked sections lack]}, for every idea of the table that lacks something"
    out = {}
    for idea, links in concept_table(nbs).items():
        got = set().union(*[lesson_parts(section(stem, anchor, nbs)) for stem, anchor in links]) if links else set()
        if missing := [p for p in PARTS_OF_A_LESSON if p not in got]: out[idea] = missing
    return out


def measures(nbs: Path = NBS) -> dict:
    start = home_until_start(nbs)
    return dict(to_attention=path_to(is_attention_def, nbs, start), to_trained_output=path_to(is_trained_output, nbs, start),
                engineering=engineering_share(nbs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--fix', action='store_true', help="rewrite each page's Next cell from nbs/book.txt")
    ap.add_argument('--check', action='store_true', help="exit 1 if the list or a page's Next cell is out of step")
    a = ap.parse_args(argv)
    if not BOOK.exists(): print(f'error: {BOOK}: missing; it lists the parts and pages of the book', file=sys.stderr); return 1
    try:
        errs = check_list()
        if errs: print('\n'.join(errs), file=sys.stderr); return 1
        bad = sync_next(fix=a.fix)
        if bad and a.check:
            print(f"pages whose Next cell disagrees with nbs/book.txt: {bad}; run `python tools/book.py --fix`", file=sys.stderr)
            return 1
        if a.fix: print(f'rewrote the Next cell of {len(bad)} page(s)')
        if not (a.fix or a.check):
            for part in parts(): print(part.title, '|', ', '.join(part.pages))
            print(json.dumps({k: v for k, v in measures().items()}, indent=1, default=str))
    except BookError as e:
        print(f'error: {e}', file=sys.stderr); return 1
    return 0


if __name__ == '__main__': sys.exit(main())
