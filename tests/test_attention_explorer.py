"""The attention explorer (docs_src/_static/attention_explorer.js, data from `inference.attention_record`).

Quick: the stored integers keep every row's sum exact; the viewer, opened from disk in headless Chromium on made-up
data, draws exactly the exported weights for the head clicked, shows only a hovered token's attention, and loads
nothing from anywhere else. The same checks on the built inference page, with the trained model's data in
results/attention/, run with the docs build in tests/test_docs.py (`test_inference_page_explorer`).
"""
from __future__ import annotations

import json, shutil, sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT/'docs_src'/'_static'/'attention_explorer.js'
DATA = ROOT/'results'/'attention'/'multi30k-de-en.json'
sys.path.insert(0, str(ROOT/'tools'))
from annotated_transformer.translation.inference import _round_rows


def test_rounding_keeps_rows_exact():
    torch.manual_seed(0)
    w = torch.randn(3, 4, 7, 9).softmax(-1)
    r = torch.tensor(_round_rows(w, 1000))
    assert (r.sum(-1) == 1000).all() and (r >= 0).all()
    assert (r / 1000 - w).abs().max() < 1e-3  # each weight within one unit


def made_up_data(n_layers=2, n_heads=3, seed=0) -> dict:
    "A data file in the exported layout, with random attention (causal for decoder self-attention)."
    g = torch.Generator().manual_seed(seed)
    def record(src, tgt, title):
        S, T = len(src), len(tgt)
        causal = torch.ones(T, T).tril().bool()
        att = dict(encoder=torch.randn(n_layers, n_heads, S, S, generator=g).softmax(-1),
                   self=torch.randn(n_layers, n_heads, T, T, generator=g).masked_fill(~causal, float('-inf')).softmax(-1),
                   cross=torch.randn(n_layers, n_heads, T, S, generator=g).softmax(-1))
        return dict(id=title, title=title, why='made up.', source=' '.join(src), reference='-', translation=' '.join(tgt),
                    src_tokens=src, tgt_tokens=tgt, attention={k: [_round_rows(v[l], 1000) for l in range(n_layers)]
                                                               for k, v in att.items()})
    return dict(name='made-up', scale=1000, n_layers=n_layers, n_heads=n_heads,
                sentences=[record(['▁ein', '▁Hund', '▁läuft', '</s>'], ['<s>', '▁a', '▁dog', '▁runs'], 'first'),
                           record(['▁zwei', '▁Männer', '▁stehen', '▁hier', '</s>'], ['<s>', '▁two', '▁men', '▁stand', '▁here'], 'second')])


@pytest.fixture(scope='module')
def browser(chromium): return chromium  # conftest's one Chromium of the session


def open_page(browser, url):
    "A page with every request and console error recorded."
    page = browser.new_page(viewport={'width': 1100, 'height': 900})
    seen = dict(requests=[], errors=[])
    page.on('request', lambda r: seen['requests'].append(r.url))
    page.on('console', lambda m: m.type == 'error' and seen['errors'].append(m.text))
    page.on('pageerror', lambda e: seen['errors'].append(str(e)))
    page.goto(url, wait_until='load')
    return page, seen


def drawn(page, root='.attention-explorer') -> list[dict]:
    "Every weight drawn (lines or heatmap squares) that is visible, as the page states it."
    return page.evaluate(f"""() => [...document.querySelector({root!r}).querySelectorAll('.ae-weight')]
        .filter(e => getComputedStyle(e).display !== 'none')
        .map(e => ({{head: +e.dataset.head, q: +e.dataset.q, k: +e.dataset.k, w: +e.dataset.w}}))""")


def check_explorer(page, data: dict, sentence: int, kind: str, layer: int, head: int):
    "Choose a sentence and attention type, click one thumbnail, hover a token: what is drawn is the data."
    root = page.locator('.attention-explorer').first
    root.get_by_label('sentence', exact=True).select_option(str(sentence))
    root.get_by_label('attention', exact=True).select_option(kind)
    root.locator(f'canvas.ae-thumb[data-layer="{layer}"][data-head="{head}"]').click()
    want = data['sentences'][sentence]['attention'][kind][layer][head]  # [query][key], integers out of scale
    scale = data['scale']
    # lines: one per nonzero weight, of that head only, strength = weight
    lines = drawn(page)
    assert {d['head'] for d in lines} == {head}
    got = {(d['q'], d['k']): d['w'] for d in lines}
    assert got == {(q, k): v / scale for q, row in enumerate(want) for k, v in enumerate(row) if v}
    # hover a query token: only its lines stay
    q = len(want) - 1
    root.locator(f'.ae-lines text.ae-token[data-side="q"][data-index="{q}"]').hover()
    only = drawn(page)
    assert only and all(d['q'] == q for d in only) and len(only) == sum(1 for v in want[q] if v)
    root.locator('.ae-caption').hover()
    # heatmap: every square, each query's row summing to one
    root.get_by_label('view', exact=True).select_option('heatmap')
    cells = drawn(page)
    assert {(d['q'], d['k']): d['w'] for d in cells} == {(q, k): v / scale for q, row in enumerate(want) for k, v in enumerate(row)}
    for qi in range(len(want)):
        assert abs(sum(d['w'] for d in cells if d['q'] == qi) - 1) < 1e-9
    # axes say who attends to whom, as the static plots do
    assert 'the query attends to the key' in root.locator('.ae-caption').inner_text()
    assert root.locator('svg.ae-heatmap').first.get_attribute('aria-label').endswith('queries (rows) attend to keys (columns)')
    root.get_by_label('view', exact=True).select_option('lines')


def test_viewer_draws_the_data_from_disk(browser, tmp_path):
    data = made_up_data()
    shutil.copy(JS, tmp_path/'attention_explorer.js')
    (tmp_path/'data.js').write_text(f'window.ATTENTION_DATA = {{"made-up": {json.dumps(data)}}};', encoding='utf-8')
    (tmp_path/'index.html').write_text('<!doctype html><html><head><meta charset="utf-8"><script src="attention_explorer.js"></script>'
                                       '</head><body><div class="attention-explorer" data-name="made-up"></div>'
                                       '<script src="data.js"></script></body></html>', encoding='utf-8')
    page, seen = open_page(browser, (tmp_path/'index.html').as_uri())
    assert page.locator('canvas.ae-thumb').count() == data['n_layers'] * data['n_heads']
    check_explorer(page, data, sentence=1, kind='cross', layer=1, head=2)
    check_explorer(page, data, sentence=0, kind='self', layer=0, head=1)
    assert not seen['errors'], seen['errors']
    assert all(u.startswith('file://') for u in seen['requests']), seen['requests']
