#!/usr/bin/env python
"""Copy the parts of MathJax the docs need from npm into docs_src/_static/mathjax/ (run only to upgrade).

    python tools/vendor_mathjax.py           # fetch mathjax@VERSION with `npm pack` and copy the files
    python tools/vendor_mathjax.py --check   # exit 1 if the vendored files differ from the npm package
"""
import argparse, filecmp, shutil, subprocess, sys, tarfile, tempfile
from pathlib import Path

VERSION = '3.2.2'
DST = Path(__file__).resolve().parent.parent/'docs_src'/'_static'/'mathjax'
FILES = ['LICENSE', 'es5/tex-chtml-full.js']
DIRS = ['es5/output/chtml/fonts/woff-v2']


def fetch(tmp: Path) -> Path:
    npm = shutil.which('npm')
    if not npm: sys.exit('npm is needed to fetch mathjax (apt-get install npm)')
    out = subprocess.run([npm, 'pack', f'mathjax@{VERSION}', '--silent'], cwd=tmp, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with tarfile.open(tmp/out) as t: t.extractall(tmp, filter='data')
    return tmp/'package'


def pairs(pkg: Path):
    for f in FILES: yield pkg/f, DST/Path(f).relative_to('es5') if f.startswith('es5/') else DST/f
    for d in DIRS:
        for f in sorted((pkg/d).iterdir()): yield f, DST/Path(d).relative_to('es5')/f.name


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--check', action='store_true'); a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pkg = fetch(Path(tmp))
        bad = []
        for src, dst in pairs(pkg):
            if a.check:
                if not dst.exists() or not filecmp.cmp(src, dst, shallow=False): bad.append(str(dst))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True); shutil.copy2(src, dst)
        if a.check:
            print('\n'.join(bad) or f'vendored MathJax matches mathjax@{VERSION}')
            return 1 if bad else 0
    print(f'copied mathjax@{VERSION} into {DST}')
    return 0


if __name__ == '__main__': sys.exit(main())
