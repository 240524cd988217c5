"""The live book in a real browser: the built site served on 127.0.0.1, every other request refused, Debian's Chromium
driven by Playwright.

A reader types a sentence on "The Transformer at work" and gets the translation at-translate gives (the shipped model,
beam 4); parses a sentence and gets the tree the Python parser gives; types a sentence into the attention explorer and
sees every head of every layer drawn for it. Bad input gets a message in the page, never a frozen page or a console
error, and a model file that fails to load says so. Slow (the site is built first); skipped without Chromium.
"""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow

DE = 'Ein Mann mit einem roten Hut fährt Fahrrad auf der Straße.'
EN_PARSE = "The company didn't say how much it paid for the two small banks."


def _open(browser, server, page_name, fail=None):
    "A fresh context (empty cache) whose requests may only go to the test server; `fail` answers 404 for URLs matching it."
    ctx = browser.new_context(viewport={'width': 1280, 'height': 800})
    seen = dict(errors=[], refused=[])
    def route(r):
        url = r.request.url
        if not url.startswith(server): seen['refused'].append(url); return r.abort()
        if fail and re.search(fail, url): return r.fulfill(status=404, body='missing')
        return r.continue_()
    ctx.route('**/*', route)
    page = ctx.new_page()
    page.on('console', lambda m: m.type == 'error' and seen['errors'].append(m.text))
    page.on('pageerror', lambda e: seen['errors'].append(str(e)))
    page.on('dialog', lambda d: (seen['errors'].append(f'a dialog opened: {d.message}'), d.dismiss()))
    page.goto(server + page_name, wait_until='load')
    return ctx, page, seen


def _close_clean(ctx, seen, refused=True):
    "Close the page; it logged no console error and (where the test asks) made no request outside the test server."
    ctx.close()
    assert not seen['errors'], seen['errors']
    if refused: assert not seen['refused'], seen['refused']


def _status(box):
    return box.locator('.live-status').text_content()


def _run(page, box, text, button='.live-go', until='Translated|Parsed|Your sentence|Type|words|Could not|shorten|at most'):
    field = box.locator('.live-input')
    field.fill(text)
    box.locator(button).click()
    page.wait_for_function(
        "([el, re]) => new RegExp(re).test(el.querySelector('.live-status').textContent) && !el.querySelector('.live-go').disabled",
        arg=[box.element_handle(), until], timeout=180_000)
    return _status(box)


@pytest.fixture(scope='module')
def python_models():
    from annotated_transformer.engine.shipped_models import pretrained
    return dict(de_en=pretrained('multi30k-de-en'), parser=pretrained('ptb-chart'))


def test_translate_box_gives_at_translates_translation(chromium, server, python_models):
    ctx, page, seen = _open(chromium, server, 'at_work.html')
    box = page.locator('.live-translate')
    status = _run(page, box, DE)
    assert status.startswith('Translated in'), status
    want = python_models['de_en'].translate(DE)[0]
    assert box.locator('.live-output').text_content() == want
    # the other direction loads only when picked
    assert not any('multi30k-en-de' in u for u in page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)"))
    _close_clean(ctx, seen)


def test_parse_box_gives_the_python_parsers_tree(chromium, server, python_models):
    ctx, page, seen = _open(chromium, server, 'at_work.html')
    box = page.locator('.live-parse')
    status = _run(page, box, EN_PARSE)
    assert status.startswith('Parsed in'), status
    words = box.locator('.live-words').text_content().removeprefix('Penn Treebank words: ').split()
    assert words == ['The', 'company', 'did', "n't", 'say', 'how', 'much', 'it', 'paid', 'for', 'the', 'two', 'small', 'banks', '.']
    tree = python_models['parser'].parse([' '.join(words)])[0]
    assert ' '.join(box.locator('.live-bracketed').text_content().split()) == ' '.join(str(tree).split())
    assert box.locator('svg.live-tree-svg text.live-tree-word').count() == len(words)
    _close_clean(ctx, seen)


def test_explorer_draws_every_head_for_the_readers_sentence(chromium, server, python_models):
    ctx, page, seen = _open(chromium, server, 'inference.html')
    box = page.locator('.live-explorer')
    assert page.locator('.attention-explorer canvas.ae-thumb').count() > 0, 'the stored example is drawn while nothing is loaded'
    status = _run(page, box, DE)
    assert status.startswith('Your sentence'), status
    want = python_models['de_en'].translate(DE)[0]
    assert want in status
    view = page.locator('.attention-explorer')
    assert view.locator('select[aria-label="sentence"] option').first.text_content() == 'your sentence'
    meta = page.evaluate("() => fetch('_static/models/multi30k-de-en/meta.json').then(r => r.json())")
    L, H = meta['n_layers'], meta['n_heads']
    assert view.locator('canvas.ae-thumb').count() == L * H
    # heatmap view of the cross-attention: one square per (query, key) per head shown
    view.locator('select[aria-label="view"]').select_option('heatmap')
    rec = python_models['de_en'].attention(DE)  # the Python explorer record of the same sentence: its token counts
    T, S = len(rec['tgt_tokens']), len(rec['src_tokens'])
    assert view.locator('rect.ae-weight').count() == H * T * S
    _close_clean(ctx, seen, refused=False)


@pytest.mark.parametrize('text, expect', [
    ('', r'^Type a sentence first\.$'),
    ('   \n ', r'^Type a sentence first\.$'),
    (' '.join(['Hund'] * 2000), r'2000 words'),
    ('Ein Hund 🐕 läuft 🏃‍♂️ im Schnee ❄️.', r'^Translated in'),
    ('一只狗在雪地里奔跑。', r'^Translated in'),
    ('<img src=x onerror="alert(1)"><b>Ein Hund</b> läuft.', r'^Translated in'),
    ('?!... ,;:', r'no words, only punctuation or symbols'),
    ('😀🚲🎉 👍', r'no words, only punctuation or symbols'),
])
def test_bad_input_gets_a_message_not_a_frozen_page(chromium, server, text, expect):
    ctx, page, seen = _open(chromium, server, 'at_work.html')
    box = page.locator('.live-translate')
    status = _run(page, box, text)
    assert re.search(expect, status), status
    assert box.locator('img').count() == 0 and box.locator('.live-output b').count() == 0, 'the input was run as HTML'
    _close_clean(ctx, seen, refused=False)


def test_a_model_file_that_fails_to_load_says_so(chromium, server):
    ctx, page, seen = _open(chromium, server, 'at_work.html', fail=r'multi30k-de-en/decoder\.onnx')
    box = page.locator('.live-translate')
    status = _run(page, box, DE)
    assert 'could not be loaded' in status.lower() or 'could not translate' in status.lower(), status
    assert 'decoder.onnx' in status and '404' in status, status
    ctx.close()
    assert not [e for e in seen['errors'] if '404' not in e], seen['errors']  # the browser itself logs the failed request


def test_a_refused_run_leaves_no_earlier_result_on_show(chromium, server):
    "A translation or parse that fails (the page's check, or the model's own limit) clears the last sentence's result."
    ctx, page, seen = _open(chromium, server, 'at_work.html')
    box = page.locator('.live-translate')
    assert _run(page, box, DE).startswith('Translated in') and box.locator('.live-output').text_content()
    status = _run(page, box, 'x' * 2000)  # one word, more subword tokens than the model takes
    assert 'at most' in status and box.locator('.live-output').text_content() == '', status
    assert _run(page, box, DE).startswith('Translated in')
    assert _run(page, box, '   ').startswith('Type a sentence') and box.locator('.live-output').text_content() == ''
    parse = page.locator('.live-parse')
    assert _run(page, parse, EN_PARSE).startswith('Parsed in')
    assert _run(page, parse, '').startswith('Type a sentence')
    assert parse.locator('.live-words').text_content() == '' and parse.locator('.live-bracketed').text_content() == ''
    assert parse.locator('svg').count() == 0
    _close_clean(ctx, seen, refused=False)


def test_one_long_word_does_not_widen_the_page(chromium, server):
    ctx, page, seen = _open(chromium, server, 'at_work.html')
    parse = page.locator('.live-parse')
    status = _run(page, parse, 'z' * 2000)
    assert status.startswith('Parsed in') and status.endswith('(1 word).'), status
    wide = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert wide <= 0, f'the page scrolls sideways by {wide} px'
    _close_clean(ctx, seen, refused=False)
