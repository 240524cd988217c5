"""The book speaks of the project only: runs, machines, dates. Published text never speaks of how the work was
organised: no "session" (or "sitting"), "issue" or "ticket" on a page (prose, shown code, stored outputs), in the README, or in a
results/ JSON file that the pages read."""
import json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = re.compile(r'\b(sessions?|sittings?|issues?|tickets?)\b', re.I)
HIDDEN = re.compile(r'^#\|\s*(hide\b|include:\s*false)', re.M)


def _published_texts(nb_path: Path):
    "(where, text) for every piece of a notebook the site shows: markdown, code not hidden, and that code's outputs"
    for i, c in enumerate(json.loads(nb_path.read_text(encoding='utf-8'))['cells']):
        src = ''.join(c['source'])
        if c['cell_type'] == 'code' and HIDDEN.search(src): continue
        if c['cell_type'] == 'markdown' or not re.search(r'^#\|\s*echo:\s*false', src, re.M): yield f'{nb_path.name} cell {i}', src
        for o in c.get('outputs', []):
            data = o.get('data', {})
            for t in (o.get('text', ''), data.get('text/markdown', ''), data.get('text/plain', ''), data.get('text/html', '')):
                if t: yield f'{nb_path.name} cell {i} output', ''.join(t)


def offending(paths) -> list:
    bad = []
    for p in paths:
        texts = _published_texts(p) if p.suffix == '.ipynb' else [(p.name, p.read_text(encoding='utf-8'))]
        for where, text in texts:
            bad += [f'{where}: ...{text[max(0, m.start() - 50):m.end() + 30]!r}...' for m in WORDS.finditer(text)]
    return bad


def test_published_text_speaks_of_the_project_only():
    paths = sorted((ROOT/'nbs').glob('*.ipynb')) + [ROOT/'README.md'] + sorted((ROOT/'results').rglob('*.json'))
    bad = offending(paths)
    assert not bad, 'published text about how the work is organised (say runs, machines, dates instead):\n' + '\n'.join(bad)


def test_the_voice_rule_sees_prose_code_and_outputs(tmp_path):
    "Plant each form once: the rule must see it"
    cell = lambda t, src, out=None: dict(cell_type=t, source=src, metadata={}, outputs=out or [], **({'execution_count': None} if t == 'code' else {}))
    for c in (cell('markdown', 'As the last session showed.'), cell('markdown', 'It ran in two sittings.'),
              cell('code', '# fixed in issue 12\nx = 1'),
              cell('code', 'print(x)', [dict(output_type='stream', name='stdout', text='see ticket 3\n')])):
        p = tmp_path/'01_x.ipynb'
        if c['cell_type'] == 'markdown': c.pop('outputs')
        p.write_text(json.dumps(dict(cells=[c], metadata={}, nbformat=4, nbformat_minor=5)))
        assert offending([p]), c
    hidden = cell('code', '#| hide\n# issue 12 is hidden from the page')
    p.write_text(json.dumps(dict(cells=[hidden], metadata={}, nbformat=4, nbformat_minor=5)))
    assert not offending([p])
    j = tmp_path/'scores.json'; j.write_text('{"note": "reported in issue 62"}')
    assert offending([j])
