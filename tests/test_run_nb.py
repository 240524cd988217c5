"""tools/run_nb.py stores what a reader who runs the page sees."""
import json, sys
from pathlib import Path
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import run_nb  # noqa: E402


def _nb(tmp_path, *sources) -> Path:
    cells = [dict(cell_type="code", id=f"c{i}", metadata={}, execution_count=None, outputs=[], source=s)
             for i, s in enumerate(sources)]
    p = tmp_path / "t.ipynb"
    p.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))
    return p


def test_a_cell_ending_with_a_semicolon_keeps_what_it_printed(tmp_path):
    "As in Jupyter, a trailing `;` hides the last line's value, not the cell's printed lines."
    p = _nb(tmp_path, "print('kept')\n41 + 1;", "print('also')\n41 + 1", "41 + 1;")
    run_nb.run(p)
    out = [c["outputs"] for c in json.loads(p.read_text())["cells"]]
    text = lambda o: "".join("".join(x.get("text", "")) for x in o if x["output_type"] == "stream")
    values = lambda o: [x for x in o if x["output_type"] == "execute_result"]
    assert text(out[0]) == "kept\n" and not values(out[0])
    assert text(out[1]) == "also\n" and values(out[1])[0]["data"]["text/plain"] == ["42"]
    assert out[2] == []


def _silent_printers(nbs: Path) -> list[str]:
    """Code cells with a `print(` line of their own whose stored outputs hold nothing printed: a run that lost them.
    Cells for a GPU (`cuda`, `multigpu`) and cells the tests do not run (`eval: false`) are left out."""
    bad = []
    for p in sorted(nbs.glob("*.ipynb")):
        for i, c in enumerate(json.loads(p.read_text(encoding="utf-8"))["cells"]):
            src = "".join(c["source"])
            if c["cell_type"] != "code" or not any(l.startswith("print(") for l in src.splitlines()): continue
            if any(l.startswith("#|") and ("cuda" in l or "multigpu" in l or "eval: false" in l) for l in src.splitlines()):
                continue
            if not any(o["output_type"] == "stream" and o.get("name") == "stdout" for o in c.get("outputs", [])):
                bad.append(f"{p.name} cell {i}: {src.splitlines()[0][:60]!r}")
    return bad


def test_cells_that_print_are_stored_with_what_they_printed(tmp_path):
    assert not _silent_printers(REPO / "nbs"), "rerun them (tools/run_nb.py --store N):\n" + "\n".join(_silent_printers(REPO / "nbs"))
    p = _nb(tmp_path, "#| slow\nx = 1\nprint(x)", "#| cuda\nprint(2)", "def f():\n    print(3)", "print(4)")
    assert _silent_printers(tmp_path) == ["t.ipynb cell 0: '#| slow'", "t.ipynb cell 3: 'print(4)'"]
    run_nb.run(p, flags=["slow"])
    assert _silent_printers(tmp_path) == []
