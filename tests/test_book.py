"""The book's rules, kept by tests: one list (nbs/book.txt) of parts and pages in reading order, from which the sidebar,
the home page's table of pages and every "Next:" link are made; no paper-section tag on an engine-room page; the reading
path's lengths (printed on the home page) within their targets; every page of Parts I-II ends with exercises whose checks
run against a reference solution under nbdev_test."""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
sys.path.insert(0, str(ROOT/'tools'))
import book  # noqa: E402


def _cells(stem): return json.loads((NBS/f'{stem}.ipynb').read_text(encoding='utf-8'))['cells']


def test_the_list_names_every_notebook_once_in_number_order():
    assert book.check_list() == []
    assert [p.title.split(' ·')[0] for p in book.parts()] == ['The Transformer at work', 'Part I', 'Part II', 'Part III', 'Part IV', 'Part V']
    assert [p.title.split(' ·')[0] for p in book.numbered_parts()] == ['Part I', 'Part II', 'Part III', 'Part IV', 'Part V']


def test_the_list_is_checked(tmp_path):
    "check_list refuses a listed page without a notebook, a notebook in no part and numbers out of reading order"
    for s in ('01_a', '02_b', '03_c'): (tmp_path/f'{s}.ipynb').write_text('{}')
    (tmp_path/'book.txt').write_text('== Part I | x\n02_b\n01_a\n04_d\n')
    errs = '\n'.join(book.check_list(tmp_path))
    assert '04_d: listed in book.txt but' in errs and 'nbs/03_c.ipynb is in no part' in errs and 'not in notebook-number order' in errs


def test_next_links_come_from_the_list():
    bad = book.sync_next(fix=False)
    assert not bad, f'pages whose closing Next cell disagrees with nbs/book.txt: {bad}; run `python tools/book.py --fix`'
    pages = book.order()
    for a, b in zip(pages, pages[1:]):   # and no other "Next:" sentence points elsewhere
        for c in _cells(a):
            s = ''.join(c['source'])
            if c['cell_type'] == 'markdown' and re.search(r'\bNext:', s):
                assert f']({b}.ipynb)' in s, f'{a}: a "Next:" that does not lead to {b}: {s[:200]!r}'


def test_engine_room_pages_carry_no_section_tag():
    "A § tag marks only a page that implements that section of the paper: none in the engine room's titles and openings"
    engine = book.parts()[-1]
    assert engine.title.startswith('Part V')
    for stem in engine.pages:
        md = [''.join(c['source']) for c in _cells(stem) if c['cell_type'] == 'markdown'][:2]
        assert not any('§' in s for s in md), f'{stem}: a § tag in its title or opening paragraph: {md}'
    for part in book.numbered_parts()[:2]:
        assert '§' in part.title, f'{part.title}: the paper parts say which sections they hold'


def test_home_page_starts_the_book():
    cells = book.home_until_start()
    assert len(cells) <= 3, 'the "Start reading" link must be on the home page\'s first screen'
    assert '](01_attention.ipynb)' in ''.join(cells[-1][1]['source'])
    assert book.start_page(cells) == '01_attention' == book.numbered_parts()[0].pages[0]


def test_reading_path_within_targets_and_printed():
    """The path from 'Start reading': first attention function within 1,500 words, a trained model's output within 3,000;
    engineering and plumbing, counted from the code, at most 5% of the cells a reader sees in Parts I-II"""
    m = book.measures()
    assert m['to_attention']['words'] <= 1500, m['to_attention']
    assert m['to_trained_output']['words'] <= 3000, m['to_trained_output']
    assert m['to_trained_output']['page'] in book.numbered_parts()[0].pages + book.numbered_parts()[1].pages
    e = m['engineering']
    assert e['share'] <= 0.05, f"engineering is {e['share']:.1%} of Parts I-II: {e['per_page']}, cells {e['flagged']}"
    # the home page prints the same numbers (its stored output is from the current pages)
    out = [o for c in _cells('index') if 'book.measures()' in ''.join(c['source']) for o in c.get('outputs', [])]
    assert out, 'the home page has no cell printing book.measures()'
    text = ''.join(''.join(o.get('data', {}).get('text/markdown', o.get('text', ''))) for o in out)
    for n in (m['to_attention']['words'], m['to_trained_output']['words'], m['engineering']['engineering_cells']):
        assert f'{n:,}' in text, f'the home page says {text!r}, but the pages now measure {n:,}: rerun nbs/index.ipynb'


def test_every_page_of_parts_one_and_two_ends_with_exercises():
    for part in book.numbered_parts()[:2]:
        for stem in part.pages:
            cells = [''.join(c['source']) for c in _cells(stem)]
            assert any(re.match(r'##\s+Exercises', s) for s in cells), f'{stem}: no "## Exercises" section'
            checks = [s for s in cells if re.search(r'^check\(', s, re.M)]
            refs = [s for s in cells if s.startswith('#| hide') and 'use_reference()' in s]
            assert len(checks) >= 2 and len(refs) >= 2, f'{stem}: {len(checks)} check cells, {len(refs)} hidden references'


def test_exercise_checks_tell_right_from_wrong(capsys, monkeypatch):
    "check() says right, not answered and wrong apart; under nbdev_test a wrong answer raises"
    sys.path.insert(0, str(NBS))
    import torch
    from _exercises import check, expect_close
    monkeypatch.delenv('IN_TEST', raising=False)
    good = torch.ones(3, 3, dtype=torch.bool).triu(1)
    check('e', lambda: expect_close(good.clone(), good, 'mask'))
    assert '✓ e: right' in capsys.readouterr().out
    def todo(): raise NotImplementedError
    check('e', todo)
    assert 'not answered yet' in capsys.readouterr().out
    check('e', lambda: expect_close(good.T, good, 'mask'))
    assert 'differs at 6 positions' in capsys.readouterr().out
    check('e', lambda: expect_close(torch.zeros(2), torch.zeros(3), 'x'))
    assert 'has shape (2,), expected (3,)' in capsys.readouterr().out
    monkeypatch.setenv('IN_TEST', '1')
    import pytest
    with pytest.raises(AssertionError, match='reference solution fails'): check('e', lambda: expect_close(good.T, good, 'mask'))


def _page_text(stem) -> str:
    "A page's prose and stored outputs: what its reader sees"
    out = []
    for c in _cells(stem):
        out.append(''.join(c['source']) if c['cell_type'] == 'markdown' else '')
        for o in c.get('outputs', []):
            d = o.get('data', {})
            out.append(''.join(o.get('text', '')) + ''.join(d.get('text/markdown', '')) + ''.join(d.get('text/plain', '')))
    return '\n'.join(out)


def home_rows() -> list:
    "(result, ours, page stem) for each row of the home page's results table, from its stored output"
    text = next(''.join(o['data']['text/markdown']) for c in _cells('index') for o in c.get('outputs', [])
                if '| result | paper | ours |' in ''.join(o.get('data', {}).get('text/markdown', '')))
    rows = []
    for line in text.splitlines()[2:]:
        cols = [c.strip() for c in line.strip('|').split(' | ')]
        rows.append((cols[0], cols[2], re.search(r'\]\((\w+)\.ipynb\)', cols[4]).group(1)))
    return rows


def test_home_rows_show_the_runs_their_pages_show():
    "Each number of ours in a home-page row is printed on the page that row links to: the row and the page show one run"
    missing = []
    for result, ours, stem in home_rows():
        nums = re.findall(r'\d[\d,]*\.\d+%?|\d+ (?:agrees|reverses|inconclusive)', ours.replace('**', ''))
        assert nums, f'{result!r}: no number in {ours!r}'
        page = _page_text(stem)
        shown = lambda n: (f'{n.split()[1]} ({n.split()[0]})' if ' ' in n else n) in page  # "9 agrees" is printed "agrees (9)"
        missing += [f'{result!r}: {n} (on the home page) is not shown on {stem}' for n in nums if not shown(n)]
    assert not missing, '\n'.join(missing)


def _copy_book(tmp_path, stems):
    "A copy of nbs/ holding book.txt and the named pages (and stubs of the others, so the list stays whole)"
    (tmp_path/'book.txt').write_text((NBS/'book.txt').read_text())
    for stem in book.order():
        src = NBS/f'{stem}.ipynb'
        (tmp_path/f'{stem}.ipynb').write_text(src.read_text() if stem in stems else '{"cells": []}')
    (tmp_path/'index.ipynb').write_text((NBS/'index.ipynb').read_text())
    return tmp_path


def _plant(path, cell, after_heading):
    "Insert `cell` after the markdown cell that starts with `after_heading`"
    nb = json.loads(path.read_text())
    i = next(i for i, c in enumerate(nb['cells']) if ''.join(c['source']).startswith(after_heading))
    nb['cells'].insert(i + 1, cell)
    path.write_text(json.dumps(nb))


def test_engineering_is_counted_from_the_code(tmp_path):
    """A cell that does engineering counts wherever it stands, under any heading, and so does the prose that introduces it;
    a hidden cell, a comment and a plain cell do not"""
    d = _copy_book(tmp_path, book.order())
    base = book.engineering_share(d)
    code = lambda s: dict(cell_type='code', execution_count=None, metadata={}, outputs=[], source=s)
    md = lambda s: dict(cell_type='markdown', metadata={}, source=s)
    # planted right after a section's heading: a visible engineering cell adds itself and the heading's prose (2)
    for cell, plus in [(code('#| hide\nout = F.scaled_dot_product_attention(q, k, v)'), 0),
                       (code('x = q + 1  # a fused kernel would do this, or a cache'), 0),
                       (code('out = F.scaled_dot_product_attention(q, k, v)'), 2),
                       (code('with torch.autocast("cpu", dtype=torch.bfloat16): y = m(x)'), 2),
                       (code('corpus = read_parallel(gzip.open(path))'), 2),
                       (code('sampler = Sampler(pairs, rank=1, world_size=2)'), 2),
                       (code('test_fail(lambda: f(-1), contains="expected")\ntest_fail(lambda: f("a"))'), 2),
                       (code('test_eq(f(1), 2)\ntest_fail(lambda: f(-1))'), 0)]:
        for stem, heading in [('03_embeddings', '## Positional encoding'), ('08_optim', '## The schedule')]:
            p = d/f'{stem}.ipynb'; keep = p.read_text()
            _plant(p, cell, heading)
            got = book.engineering_share(d)
            assert got['engineering_cells'] == base['engineering_cells'] + plus, (stem, cell['source'], got['per_page'][stem])
            p.write_text(keep)
    p = d/'03_embeddings.ipynb'   # prose right before an engineering cell is engineering too
    _plant(p, code('y = torch.compile(layer)(x)'), '## Positional encoding'); _plant(p, md('We compile the layer:'), '## Positional encoding')
    assert book.engineering_share(d)['engineering_cells'] == base['engineering_cells'] + 2


def test_the_concept_table_is_full():
    "Every idea of §3, §5 and §6.1 has its quote, math, code, check and picture in the sections the home page links"
    table = book.concept_table()
    for idea in ['attention', 'masking', 'multi-head', 'feed-forward', 'residual', 'positional', 'tying', 'stacks',
                 'schedule', 'label smoothing', 'greedy', 'beam', 'bleu']:
        assert any(idea in k.lower() for k in table), f'the concept table has no row for {idea}'
    assert book.concept_gaps() == {}


def test_the_concept_table_sees_what_is_missing(tmp_path):
    "Remove one part of a lesson from a linked section and the table's check names it"
    d = _copy_book(tmp_path, book.order())
    p = d/'08_optim.ipynb'; nb = json.loads(p.read_text())
    for c in nb['cells']:
        if c['cell_type'] == 'markdown': c['source'] = ''.join(c['source']).replace('$$', '$')
        if c['cell_type'] == 'code': c['outputs'] = []
    p.write_text(json.dumps(nb))
    assert book.concept_gaps(d).get('The learning-rate schedule') == ['math', 'picture']
    idx = d/'index.ipynb'; nb = json.loads(idx.read_text())
    for c in nb['cells']:
        if book.CONCEPTS_RE.search(''.join(c['source'])): c['source'] = ''.join(c['source']).replace('#the-schedule', '#no-such-section')
    idx.write_text(json.dumps(nb))
    with __import__('pytest').raises(book.BookError, match='no section with the anchor #no-such-section'): book.concept_gaps(d)
