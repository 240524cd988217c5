#!/usr/bin/env python
"""The in-page models against the Python ones, on whole test sets: the browser path (the site's own JS modules and
onnxruntime-web's wasm backend, run under node) beside the package (PyTorch).

    python tools/live_parity.py [--models DIR] [--out results/live/parity.json] [--limit N]

- Translation: every line of Multi30k test2016, de->en, beam 4: the share of sentences translated identically to
  `pretrained("multi30k-de-en").translate` (what at-translate runs), and both corpus BLEUs against the references.
- Parsing: every sentence of WSJ section 22 (its gold words), the shipped chart parser: the share of identical trees
  and both EVALB-style F1s against the gold trees.
DIR holds the exported models (default: the docs build's cache, else a fresh export into a temporary folder).
Writes one JSON file with the numbers, the machine and the seconds each side took, and prints it.
"""
from __future__ import annotations

import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

from annotated_transformer.training.data import read_lines
from annotated_transformer.engine.runs import hardware

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT/'tests'/'js'


def data_dir() -> Path:
    from annotated_transformer.training.data import default_data_dir
    return Path(default_data_dir())


def exported_models(out: Path) -> Path:
    "The site's exported models: the docs build's cache if it is complete, else a fresh export into `out`"
    sys.path.insert(0, str(ROOT/'tools'))
    import build_docs
    cache = build_docs.LIVE_CACHE/build_docs._export_key()
    if (cache/'done').exists(): return cache
    from annotated_transformer.bench.onnx_export import export_site_models
    from annotated_transformer.bench.onnx_parser import export_parser
    export_site_models(out, names=['multi30k-de-en'])
    export_parser('ptb-chart', out)
    return out


def _node(script: str, *args, input_path: Path) -> tuple[list[str], float]:
    if not shutil.which('node'): raise SystemExit('live_parity: node is not installed')
    t0 = time.time()
    r = subprocess.run(['node', str(JS/script), *map(str, args), str(input_path)], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    if r.returncode: raise SystemExit(f'live_parity: node {script} failed:\n{r.stderr[-3000:]}')
    return r.stdout.splitlines(), time.time() - t0


def translation_parity(models: Path, limit: int | None = None, tmp: Path | None = None) -> dict:
    import sacrebleu
    from annotated_transformer.engine.shipped_models import pretrained
    d = data_dir()/'multi30k'
    src = read_lines(d/'test_2016_flickr.de.gz')[:limit]
    ref = read_lines(d/'test_2016_flickr.en.gz')[:limit]
    t0, tp = time.time(), time.process_time()
    py = pretrained('multi30k-de-en').translate(src, beam_size=4)
    py_s, py_cpu = time.time() - t0, time.process_time() - tp
    f = (tmp or Path(tempfile.mkdtemp()))/'test2016.de'
    f.write_text('\n'.join(src) + '\n', encoding='utf-8')
    js, js_s = _node('translate_check.mjs', models/'multi30k-de-en', '--beam', 4, input_path=f)
    if len(js) != len(py): raise SystemExit(f'live_parity: node gave {len(js)} lines for {len(py)} sentences')
    same = sum(a == b for a, b in zip(py, js))
    bleu = lambda hyps: sacrebleu.corpus_bleu(hyps, [ref]).score
    return dict(model='multi30k-de-en', data='test_2016_flickr (de->en)', sentences=len(src), beam=4,
                identical=same, identical_share=same / len(src), bleu_python=bleu(py), bleu_page=bleu(js),
                python_s=round(py_s, 1), python_cpu_s=round(py_cpu, 1), node_s=round(js_s, 1),
                differing=[dict(line=i + 1, python=a, page=b) for i, (a, b) in enumerate(zip(py, js)) if a != b][:20])


def parse_parity(models: Path, limit: int | None = None, tmp: Path | None = None) -> dict:
    from annotated_transformer.engine.shipped_models import pretrained
    from annotated_transformer.parsing.trees import ptb_trees, parse_tree
    from annotated_transformer.parsing.evalb import evalb, with_tags
    gold = ptb_trees('dev')[:limit]
    words = [t.words() for t in gold]
    t0, tp = time.time(), time.process_time()
    py = pretrained('ptb-chart').parse([' '.join(w) for w in words])
    py_s, py_cpu = time.time() - t0, time.process_time() - tp
    f = (tmp or Path(tempfile.mkdtemp()))/'wsj22.jsonl'
    f.write_text('\n'.join(json.dumps(w) for w in words) + '\n', encoding='utf-8')
    js_lines, js_s = _node('parser_check.mjs', models/'ptb-chart', input_path=f)
    js = [json.loads(l)['bracketed'] for l in js_lines]
    norm = lambda s: ' '.join(str(s).split())
    same = sum(norm(a) == norm(b) for a, b in zip(py, js))
    f1 = lambda trees: evalb(gold, [with_tags(t, g) for t, g in zip(trees, gold)])['all']['f1']
    return dict(model='ptb-chart', data='WSJ section 22 (gold words)', sentences=len(gold), identical=same,
                identical_share=same / len(gold), f1_python=f1(py), f1_page=f1([parse_tree(s) for s in js]),
                python_s=round(py_s, 1), python_cpu_s=round(py_cpu, 1), node_s=round(js_s, 1))


def positive_int(s: str) -> int:
    "An argparse type: a whole number of at least 1"
    try: n = int(s)
    except ValueError: raise argparse.ArgumentTypeError(f'{s!r} is not a whole number')
    if n < 1: raise argparse.ArgumentTypeError(f'{n} is less than 1')
    return n


def manifest_sha256(name: str) -> str:
    "The sha256 of a shipped model's MANIFEST, which holds the sha256 of each of its files: the model, in one sum."
    from annotated_transformer.engine.shipped_models import shipped_path
    from annotated_transformer.training.data import sha256_file
    return sha256_file(shipped_path(name) / 'MANIFEST')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--models', default=None, help='exported models (default: the docs build cache, else a fresh export)')
    ap.add_argument('--out', default=str(ROOT/'results'/'live'/'parity.json'), help='JSON file to write')
    ap.add_argument('--limit', type=positive_int, default=None, help='only the first N sentences of each set (a quick look)')
    ap.add_argument('--only', choices=('translation', 'parsing'), default=None, help='one of the two checks')
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(a.models) if a.models else exported_models(Path(tmp)/'models')
        wanted = [n for n, check in (('multi30k-de-en', 'parsing'), ('ptb-chart', 'translation')) if a.only != check]
        missing = [str(models/n/'meta.json') for n in wanted if not (models/n/'meta.json').is_file()]
        if missing: print(f'error: --models: {", ".join(missing)}: missing (export the models first)', file=sys.stderr); return 1
        hw = hardware()  # the package's record of this machine, as run records keep it
        res = dict(cpu=hw['cpu'], logical_cpus=hw['logical_cpus'], when=time.strftime('%Y-%m-%d'),
                   node=subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip())
        if a.only != 'parsing': res['translation'] = translation_parity(models, a.limit, Path(tmp))
        if a.only != 'translation': res['parsing'] = parse_parity(models, a.limit, Path(tmp))
        for check, name in (('translation', 'multi30k-de-en'), ('parsing', 'ptb-chart')):  # which weights were compared
            if check in res: res[check]['manifest_sha256'] = manifest_sha256(name)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + '\n', encoding='utf-8')
    print(json.dumps({k: ({kk: vv for kk, vv in v.items() if kk != 'differing'} if isinstance(v, dict) else v) for k, v in res.items()}, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
