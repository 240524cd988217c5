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
    """The path from 'Start reading': first attention function within 1,500 words, a trained model's output within 6,000;
    engine-room cells at most 10% of Parts I-II"""
    m = book.measures()
    assert m['to_attention']['words'] <= 1500, m['to_attention']
    assert m['to_trained_output']['words'] <= 6000, m['to_trained_output']
    assert m['to_trained_output']['page'] in book.numbered_parts()[0].pages + book.numbered_parts()[1].pages
    assert m['engineering']['share'] <= 0.10, f"engine-room cells are {m['engineering']['share']:.0%} of Parts I-II: {m['engineering']}"
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
