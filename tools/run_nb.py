"""Run a notebook in place and store the outputs of the real run, as the project's notebooks are stored.

    python tools/run_nb.py nbs/01_attention.ipynb [--flags slow] [--cells 12 13]

Cells flagged `slow`, `cuda`, `multigpu` or `rerun` keep their stored outputs unless `--flags` names the flag; with
`--cells`, only the cells with those indices run (plus every cell that imports, so that names exist) and the others
keep their outputs; with `--store`, the whole notebook runs but only the listed cells take their new outputs. Runs from the notebook's folder, as `nbdev_test` does, but without `IN_TEST`: exercise checks show
what a reader sees before answering. Then `nbdev_clean` tidies the file.
"""
import argparse, json, os, sys, time
from pathlib import Path

FLAGS = {'slow', 'cuda', 'multigpu', 'rerun'}


def _shell(path: Path):
    """execnb's `CaptureShell`, except that a cell ending with `;` keeps what it printed: execnb drops a whole cell's
    printed output there, where Jupyter, as a reader runs the page, hides only the value of its last line."""
    from execnb.shell import AttrDict, CaptureShell, InteractiveShell, capture_output

    class Shell(CaptureShell):
        def _run(self, raw_cell, store_history=False, silent=False, shell_futures=True, cell_id=None,
                 stdout=True, stderr=True, display=True, verbose=False):
            with capture_output(display=display, stdout=stdout and not verbose, stderr=stderr and not verbose) as c:
                result = InteractiveShell.run_cell(self, raw_cell, store_history, silent, shell_futures=shell_futures,
                                                   cell_id=cell_id)
            return AttrDict(result=result, stdout=c.stdout, stderr=c.stderr, display_objects=c.outputs,
                            exception=result.error_in_exec or result.error_before_exec,
                            quiet=raw_cell.rstrip().endswith(';'))  # `;`: no value shown, as in Jupyter
    return Shell(path)


def run(path: Path, flags=(), cells=None, store=None) -> float:
    from execnb.nbio import read_nb, write_nb
    from nbdev.process import NBProcessor, extract_directives
    os.environ.pop('IN_TEST', None)
    nb = read_nb(path)
    skip = FLAGS - set(flags)
    old = {i: c.get('outputs') for i, c in enumerate(nb.cells)}

    def _skip(cell):
        if cell.cell_type != 'code': return True
        if 'nbdev_export(' in cell.source: return True
        d = extract_directives(cell, remove=False) or {}
        if skip & d.keys(): return True
        if (d.get('eval:') or [''])[0].lower() == 'false': return True   # as nbdev_test does
        if cells is not None:
            i = nb.cells.index(cell)
            return i not in cells and 'import' not in cell.source and 'default_exp' not in cell.source
        return False

    t0 = time.time()
    sh = _shell(path)
    cwd = os.getcwd()
    try:
        os.chdir(path.parent)
        sh.run_all(nb, exc_stop=True, preproc=_skip)
    finally:
        os.chdir(cwd)
    if store is not None:   # keep every other cell's stored outputs
        for i, c in enumerate(nb.cells):
            if i not in store and old[i] is not None: c['outputs'] = old[i]
    write_nb(nb, path)
    return time.time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('notebooks', nargs='+', type=Path)
    ap.add_argument('--flags', nargs='*', default=[], help='also run the cells with these flags (e.g. slow)')
    ap.add_argument('--cells', nargs='*', type=int, help='run only these cell indices (and the import cells)')
    ap.add_argument('--store', nargs='*', type=int, help='run the whole notebook but store only these cells\' new outputs')
    a = ap.parse_args(argv)
    for p in a.notebooks:
        if not p.exists(): ap.error(f'{p}: no such notebook')
        try: n = len(json.loads(p.read_text(encoding='utf-8'))['cells'])
        except (ValueError, KeyError, TypeError, UnicodeError) as e:
            print(f'error: {p}: not a readable notebook ({type(e).__name__}: {e})', file=sys.stderr); return 1
        bad = [i for i in (a.cells or []) + (a.store or []) if not 0 <= i < n]
        if bad: ap.error(f'--cells/--store {bad[0]}: {p} has cells 0 to {n - 1}')
        dt = run(p.resolve(), a.flags, set(a.cells) if a.cells is not None else None, set(a.store) if a.store is not None else None)
        print(f'{p}: ran in {dt:.1f}s')
    import subprocess
    for p in a.notebooks: subprocess.run(['nbdev_clean', '--fname', str(p)], check=False)


if __name__ == '__main__': sys.exit(main())
