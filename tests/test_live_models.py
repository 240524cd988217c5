"""The in-page translator against at-translate on all of Multi30k test2016: the site's own JS modules (spm.js,
decode.js, translator.js) over onnxruntime-web's wasm backend, run under node, beside the package's PyTorch model.
Targets: the same beam-4 translation for at least 99% of the sentences, corpus BLEU within 0.1. Slow (about two
minutes on two cores); skipped without node, node_modules, onnxruntime or the corpus. tools/live_parity.py runs the
same comparison and writes results/live/parity.json, which 'The Transformer at work' prints."""
import importlib.util, shutil, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT/'tools'))

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    for mod in ('onnx', 'onnxruntime', 'onnxscript'):
        if importlib.util.find_spec(mod) is None: pytest.skip(f'{mod} is not installed (pip install -e ".[dev]")')
    if not shutil.which('node'): pytest.skip('node is not installed')
    if not (ROOT/'node_modules'/'onnxruntime-web').exists(): pytest.skip('node_modules/onnxruntime-web is missing: npm ci')
    import live_parity
    try: live_parity.data_dir()
    except Exception as e: pytest.skip(f'no data directory: {e}')
    if not (live_parity.data_dir()/'multi30k'/'test_2016_flickr.de.gz').exists(): pytest.skip('Multi30k test2016 is missing')
    from annotated_transformer.bench.onnx_export import export_site_models
    out = tmp_path_factory.mktemp('live')
    export_site_models(out, names=('multi30k-de-en',))
    return out


def test_page_translates_test2016_as_at_translate_does(exported, tmp_path):
    import live_parity
    r = live_parity.translation_parity(exported, tmp=tmp_path)
    print({k: v for k, v in r.items() if k != 'differing'})
    assert r['sentences'] == 1000
    assert r['identical_share'] >= 0.99, r['differing']
    assert abs(r['bleu_page'] - r['bleu_python']) <= 0.1, r
