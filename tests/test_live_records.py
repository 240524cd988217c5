"""The live book's stored measurements are of the models that ship: results/live/parity.json (the page against Python,
tools/live_parity.py) and results/bench/live-*.json (its speed in Chromium, tools/bench_live.py) record the sha256 of
the MANIFEST of each shipped model they ran, and 'The Transformer at work' prints them. When a model in pretrained/
changes, they are stale until both tools run again (the page's parity was once printed for a parser that no longer
shipped)."""
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT/'tools'))
from live_parity import manifest_sha256  # tools/live_parity.py

CHECKS = {'translation': 'multi30k-de-en', 'parsing': 'ptb-chart'}  # parity.json's sections, and the model each ran


def stale(results: Path) -> list[str]:
    "Each record of a shipped model that differs from pretrained/ now, or that names none."
    out, parity = [], results/'live'/'parity.json'
    records = [(parity, check, json.loads(parity.read_text()).get(check, {}).get('manifest_sha256'), name)
               for check, name in CHECKS.items()]
    for f in sorted((results/'bench').glob('live-*.json')):
        sums = json.loads(f.read_text()).get('manifest_sha256') or {}
        records += [(f, 'manifest_sha256', sums.get(name), name) for name in CHECKS.values()]
    for f, where, got, name in records:
        if got != manifest_sha256(name):
            out.append(f"{f.relative_to(results.parent)} {where}: {'no record of' if got is None else 'another'} {name}")
    return out


def test_the_live_books_measurements_are_of_the_models_that_ship():
    bad = stale(ROOT/'results')
    assert not bad, ('measured with other weights than pretrained/ holds; run tools/live_parity.py and '
                     'tools/bench_live.py again:\n' + '\n'.join(bad))


def test_a_record_of_other_weights_or_of_none_is_stale(tmp_path):
    "Plant both: another parser's sum in parity.json, and a speed record that names no models."
    for sub in ('live', 'bench'): (tmp_path/'results'/sub).mkdir(parents=True)
    p = json.loads((ROOT/'results'/'live'/'parity.json').read_text())
    p['parsing']['manifest_sha256'] = '0' * 64
    (tmp_path/'results'/'live'/'parity.json').write_text(json.dumps(p))
    b = json.loads(next((ROOT/'results'/'bench').glob('live-*.json')).read_text())
    b.pop('manifest_sha256', None)
    (tmp_path/'results'/'bench'/'live-x.json').write_text(json.dumps(b))
    bad = stale(tmp_path/'results')
    assert any('parity.json parsing: another ptb-chart' in s for s in bad), bad
    assert sum('live-x.json manifest_sha256: no record of' in s for s in bad) == 2, bad
    assert not any('parity.json translation' in s for s in bad), bad
