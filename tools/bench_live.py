#!/usr/bin/env python
"""How fast the live book is for a reader: the built site served on 127.0.0.1, headless Chromium (Debian's), the
page "The Transformer at work".

    python tools/bench_live.py [--out results/bench/live-<cpu>.json] [--sentences 20]

Measures, in one run:
- cold cache: from opening the page to the first translation on the screen (the runtime and the de-en model are
  fetched), and the bytes transferred (as served: no gzip on this test server; the gzip sizes come from the site's
  models/index.json);
- warm cache (the same browser profile opened again): from opening the page to the first translation;
- each further sentence (test2016 lines of at most 20 words, beam 4): seconds per sentence;
- a parse of a 30-word sentence (the parser loaded first, then timed on its own).
The site must be built first (`python tools/build_docs.py`). Writes one JSON file and prints it.
"""
from __future__ import annotations

import argparse, functools, http.server, json, shutil, sys, tempfile, threading, time
from pathlib import Path

from annotated_transformer.training.data import read_lines
from annotated_transformer.engine.runs import hardware
from live_parity import manifest_sha256, positive_int  # tools/, beside this file

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'docs'
PARSE_30 = ("The chairman of the company said on Tuesday that the board had approved a plan to sell two of its "
            "smaller units to a group of investors for about $ 40 million in cash .")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


def serve(directory: Path):
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(_Quiet, directory=str(directory)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f'http://127.0.0.1:{srv.server_address[1]}/'


def _translate(page, text: str) -> tuple[str, float]:
    box = page.locator('.live-translate')
    box.locator('.live-input').fill(text)
    t0 = time.perf_counter()
    box.locator('.live-go').click()
    page.wait_for_function("el => /^Translated|^Could not/.test(el.querySelector('.live-status').textContent)",
                           arg=box.element_handle(), timeout=300_000)
    dt = time.perf_counter() - t0
    status = box.locator('.live-status').text_content()
    if not status.startswith('Translated'): raise SystemExit(f'bench_live: the page said: {status}')
    return box.locator('.live-output').text_content(), dt


def first_translation(ctx, url, text) -> dict:
    "Open the page and translate at once: seconds from navigation to the translation on screen, bytes fetched"
    page = ctx.new_page()
    sizes = []
    page.on('response', lambda r: sizes.append(int(r.headers.get('content-length', 0) or 0)))
    t0 = time.perf_counter()
    page.goto(url + 'at_work.html', wait_until='domcontentloaded')
    page.wait_for_selector('.live-translate .live-go')
    out, _ = _translate(page, text)
    dt = time.perf_counter() - t0
    return dict(seconds=round(dt, 2), bytes_fetched=sum(sizes), translation=out, page=page)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', default=None, help='JSON file to write (default: results/bench/live-<cpu>.json)')
    ap.add_argument('--sentences', type=positive_int, default=20, help='further sentences timed (default: 20)')
    ap.add_argument('--data', default=None, help='test2016 German file (default: the shared Multi30k test2016)')
    a = ap.parse_args(argv)
    if not (DOCS/'_static'/'models'/'index.json').exists():
        print('error: docs/_static/models/index.json: build the site first (python tools/build_docs.py)', file=sys.stderr); return 1
    exe = shutil.which('chromium') or shutil.which('chromium-browser')
    if not exe: print('error: chromium is not installed (apt-get install chromium)', file=sys.stderr); return 1
    data = Path(a.data) if a.data else next((p for p in (ROOT.parent/'shared'/'data'/'multi30k').glob('test_2016_flickr.de*')), None)
    if data is None or not data.exists(): print(f'error: {a.data or "../shared/data/multi30k/test_2016_flickr.de"}: missing', file=sys.stderr); return 1
    try: lines = read_lines(data)
    except (OSError, ValueError) as e: print(f'error: {e}', file=sys.stderr); return 1
    short = [l for l in lines if 0 < len(l.split()) <= 20][: a.sentences + 1]
    if len(short) < 2: print(f'error: {data}: {len(short)} sentences of 1 to 20 words; the benchmark needs at least 2', file=sys.stderr); return 1
    index = json.loads((DOCS/'_static'/'models'/'index.json').read_text())
    from playwright.sync_api import sync_playwright
    srv, url = serve(DOCS)
    hw = hardware()  # the package's record of this machine, as run records keep it
    res = dict(cpu=hw['cpu'], logical_cpus=hw['logical_cpus'], browser=None, when=time.strftime('%Y-%m-%d'))
    try:
        with sync_playwright() as p, tempfile.TemporaryDirectory() as prof:
            kw = dict(executable_path=exe, args=['--no-sandbox', '--disable-gpu'], headless=True, viewport={'width': 1280, 'height': 800})
            ctx = p.chromium.launch_persistent_context(prof, **kw)
            res['browser'] = ctx.browser.version if ctx.browser else 'chromium'
            cold = first_translation(ctx, url, short[0])
            cold.pop('page').close(); ctx.close()
            ctx = p.chromium.launch_persistent_context(prof, **kw)
            warm = first_translation(ctx, url, short[0])
            page = warm.pop('page')
            times = [_translate(page, s)[1] for s in short[1:]]
            pp = page.locator('.live-parse')
            pp.locator('.live-input').fill('A short sentence .')
            pp.locator('.live-go').click()
            page.wait_for_function("el => /^Parsed|^Could not/.test(el.querySelector('.live-status').textContent)", arg=pp.element_handle(), timeout=300_000)
            pp.locator('.live-input').fill(PARSE_30)
            t0 = time.perf_counter(); pp.locator('.live-go').click()
            page.wait_for_function("el => /^Parsed|^Could not/.test(el.querySelector('.live-status').textContent)", arg=pp.element_handle(), timeout=300_000)
            parse_s = time.perf_counter() - t0
            status = pp.locator('.live-status').text_content()
            if not status.startswith('Parsed'): raise SystemExit(f'bench_live: the parser said: {status}')
            ctx.close()
    finally:
        srv.shutdown(); srv.server_close()
    de_en = index['models']['multi30k-de-en']['files'] + index['runtime']['files']
    res.update(
        first_translation_cold_s=cold['seconds'], first_translation_warm_s=warm['seconds'],
        cold_bytes_fetched=cold['bytes_fetched'], first_translation_gzip_bytes=sum(f['gzip_bytes'] for f in de_en),
        first_translation_raw_bytes=sum(f['bytes'] for f in de_en),
        further_sentences=len(times), further_sentence_s=dict(mean=round(sum(times) / len(times), 3), max=round(max(times), 3)),
        parse_30_words_s=round(parse_s, 3), beam=4, data=data.name,
        manifest_sha256={n: manifest_sha256(n) for n in ('multi30k-de-en', 'ptb-chart')})  # the weights the site was built from
    out = Path(a.out) if a.out else ROOT/'results'/'bench'/f"live-{res['cpu'].split('(')[0].strip().lower().replace(' ', '-')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + '\n')
    print(json.dumps(res, indent=1))
    print(f'wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
