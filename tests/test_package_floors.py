"The experiments layer's house rules (issue 16): modules import only downward and only each other's public names, and no two functions share a name."
import ast, collections, pathlib
PKG = pathlib.Path(__file__).resolve().parents[1] / "annotated_transformer"

# Each module's floor: it may import only modules on lower floors. The README draws the same house.
FLOORS = {
    "attention": 0, "rnn": 0, "data": 0, "batching": 0, "optim": 0, "loss": 0, "complexity": 0,
    "bleu": 0,                                     # BLEU by hand: clipped n-gram precisions, brevity penalty (10a)
    "layers": 1, "embeddings": 1, "trees": 1,     # the paper's core (dropout from attention), and treebank files
    "model": 2, "evalb": 2, "spans": 2,           # spans: a tree as labelled spans, and CKY (19a)
    "config": 3,                                   # TrainConfig; TransformerConfig is the model's (04_model)
    "chart": 3,                                    # the chart parser: a model the checkpoint format rebuilds
    "chart_choices": 4,                            # the chart parser's decoding and checkpoint choices (20a)
    "kinds": 3.5,                                  # the registry of model kinds: what builds each from its config
    "decode": 4, "checkpoint": 4, "sentiment": 4,  # one checkpoint format
    "runs": 5, "inference": 5,                     # run records; loading and translating
    "parser": 5,                                   # the sequence-to-sequence parser: vocabularies, TreeConstraint, parse (19)
    "parsing_runs": 6,                             # either parser's checkpoint loaded, at-parse's files, a parsing run evaluated (31b)
    "precision": 6,                                # fp32 or bf16, by the machine's flags and a trial
    "translation": 6,                              # BLEU as the paper measures it, and a corpus scored (14)
    "train": 7, "copy_task": 7,                    # the Trainer; the copy tutorial
    "distributed": 8, "memory_budget": 8,          # memory_budget: the largest batch that fits a GPU (27a)
    "tasks": 8,                                    # every task as values, with its data builder
    "evaluation": 9, "bench": 9,                  # evaluation: at-evaluate's driver and load_translator (31); bench measures the tasks' models
    "ct2": 10,                                     # a translation checkpoint exported to CTranslate2 (loads through evaluation)
    "variations": 10, "suite": 11, "fast_path": 10, "op_profile": 10, "scaling": 10,                # suite runs every benchmark of bench
    "launch": 10,                                  # what at-train does: data, model, Trainer, report
    "table3": 11,                                  # reads the grids of variations: beside the paper, seeds, verdicts
    "grid": 11,                                    # runs the grid of variations: each row through the Trainer, table3.csv (31a)
    "shipped": 11,                                 # the shipped models by name: loads through checkpoint, uses inference and parser
    "onnx_export": 11.5,                           # the shipped translators as ONNX graphs for the page: loads through shipped
    "onnx_parser": 11.75,                          # the shipped chart parser as an ONNX graph: uses onnx_export's weight tools
    "console": 11.5,                               # the commands' plumbing: signals from the first moment, one-line errors, help, --device
    "cli": 12,                                     # every console script
}

def imports(path: pathlib.Path) -> set[str]:
    """The package modules a file imports, at its top or inside a function: `from .x import`, `from annotated_transformer.x import`,
    and a module taken from the package itself (`from . import x`, `from annotated_transformer import x`: console once reached the
    command line above it so, unseen)."""
    out, names = set(), {p.stem for p in PKG.glob("*.py")}
    for n in ast.walk(ast.parse(path.read_text())):
        if not isinstance(n, ast.ImportFrom): continue
        if n.level == 1 and n.module: out.add(n.module.split(".")[0])
        elif n.level == 0 and n.module and n.module.startswith("annotated_transformer."): out.add(n.module.split(".")[1])
        elif (n.level == 1 and not n.module) or (n.level == 0 and n.module == "annotated_transformer"):
            out |= {a.name for a in n.names if a.name in names}
    return out

def modules(): return sorted(p for p in PKG.glob("*.py") if p.stem not in ("__init__", "_modidx"))

def test_every_module_has_a_floor():
    assert {p.stem for p in modules()} == set(FLOORS), "a module was added or removed: give it a floor here and in the README"

def test_imports_go_only_downward():
    bad = [f"{p.stem} (floor {FLOORS[p.stem]}) imports {d} (floor {FLOORS[d]})"
           for p in modules() for d in imports(p) if d in FLOORS and FLOORS[d] >= FLOORS[p.stem]]
    assert not bad, bad

def test_no_private_imports_across_modules():
    "A name one module needs from another is public there (documented, in its __all__), not a `_name` reached into."
    bad = []
    for p in modules() + [PKG / "__init__.py"]:
        for n in ast.walk(ast.parse(p.read_text())):
            if not isinstance(n, ast.ImportFrom): continue
            if n.level: source = n.module or "annotated_transformer"  # `from .x import` (or `from . import`)
            elif n.module and n.module.split(".")[0] == "annotated_transformer": source = n.module
            else: continue
            bad += [f"{p.stem} imports {a.name} from {source} (line {n.lineno})" for a in n.names if a.name.startswith("_")]
    assert not bad, bad

def test_no_two_functions_or_classes_share_a_name():
    seen = collections.defaultdict(list)
    for p in modules():
        for n in ast.parse(p.read_text()).body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)): seen[n.name].append(p.stem)
    assert not {k: v for k, v in seen.items() if len(v) > 1}

def test_nothing_registers_at_import():
    "No module-level call of a register_* function: tasks and recipes are values, written out."
    calls = [f"{p.stem}: {ast.unparse(n)[:60]}" for p in modules() for n in ast.parse(p.read_text()).body
             if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and "register" in ast.unparse(n.value.func)]
    assert not calls, calls

def _readme_house() -> tuple[list[tuple[int, int, list[str]]], list[str]]:
    "The README's floor table (low, high, modules) and its chain of imports, as written."
    import re
    text = (PKG.parent / "README.md").read_text(encoding="utf-8")
    house = text[text.index("## How the package is built"):]
    rows = []
    for line in house.split("\n## ", 1)[0].splitlines():
        m = re.match(r"^\| (\d+)(?:-(\d+))? \| (.+?) \|", line)
        if m: rows.append((int(m.group(1)), int(m.group(2) or m.group(1)), re.findall(r"`(\w+)`", m.group(3))))
    chain = next(l for l in house.splitlines() if "─►" in l).split(" ─► ")
    return rows, chain

def test_readme_floor_table_is_the_code():
    rows, _ = _readme_house()
    listed = [m for _, _, ms in rows for m in ms]
    assert sorted(listed) == sorted(FLOORS), f"the README's table lists {sorted(set(listed) ^ set(FLOORS))} wrongly"
    wrong = [f"{m} is on floor {FLOORS[m]}, the README says {lo}-{hi}" for lo, hi, ms in rows for m in ms if not lo <= FLOORS[m] <= hi]
    assert not wrong, wrong

def test_readme_chain_is_a_chain_of_imports():
    _, chain = _readme_house()
    assert len(chain) > 3 and chain[0] == "cli"
    missing = [f"{a} does not import {b}" for a, b in zip(chain, chain[1:]) if b not in imports(PKG / f"{a}.py")]
    assert not missing, missing


# The keys of the dict a checkpoint is stored as (checkpoint.py's `_stored`); other modules read a `Checkpoint`'s attributes.
STORED_KEYS = {"model_config", "tokenizer", "optimizer", "scheduler", "scaler", "rng", "extra", "checksum", "averaged", "world_size", "format"}

def test_checkpoint_keys_are_read_only_in_checkpoint():
    "Only checkpoint.py reads a stored checkpoint's keys (or calls torch.load on one); everyone else uses the record's attributes."
    bad = []
    for p in modules():
        if p.stem == "checkpoint": continue
        for n in ast.walk(ast.parse(p.read_text())):
            key = None
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant): key = n.slice.value
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "pop", "setdefault")
                  and n.args and isinstance(n.args[0], ast.Constant)): key = n.args[0].value
            if key in STORED_KEYS: bad.append(f"{p.stem}.py line {n.lineno} reads {key!r}")
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load"
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "torch" and p.stem != "distributed"):
                bad.append(f"{p.stem}.py line {n.lineno} calls torch.load")  # distributed.py loads its own rank files, not checkpoints
    assert not bad, bad

def test_no_module_passes_400_lines():
    "A module that grows past 400 lines holds more than one concern: split it by concern (a new page and module), not by size."
    big = {p.stem: n for p in modules() if (n := len(p.read_text().splitlines())) > 400}
    assert not big, big


# The reading order (nbs/book.txt) is also the import order: a module imports only modules of notebooks before its own. The
# reading path (Parts I-III) exports the paper's science; the plumbing that runs its experiments (evaluating a run, the Table 3
# grid, loading parsers) is exported by Part V pages (31, 31a, 31b), which Part III pages call in their cells.

def notebook_of_module() -> dict[str, str]:
    "Each exported module's notebook (its `#| default_exp`)."
    import json, re
    out = {}
    for nb in (PKG.parent / "nbs").glob("*.ipynb"):
        for c in json.loads(nb.read_text())["cells"]:
            m = re.search(r"#\|\s*default_exp\s+(\S+)", "".join(c["source"]))
            if m: out[m.group(1)] = nb.stem; break
    return out

def test_a_module_imports_only_modules_of_earlier_notebooks():
    book = [l.strip() for l in (PKG.parent / "nbs" / "book.txt").read_text().splitlines() if l.strip() and not l.startswith(("#", "=="))]
    place, nb = {n: k for k, n in enumerate(book)}, notebook_of_module()
    forward = {(p.stem, d) for p in modules() for d in imports(p) if d in nb and place[nb[d]] > place[nb[p.stem]]}
    assert not forward, f"(module, a later notebook's module it imports): {sorted(forward)}"


# Which kind of model a checkpoint or a built model holds is the registry's to say (kinds.py, issue 63): no other module tests a
# model's or a vocabulary's class, or compares a kind's name, to choose what to do. Each class may be checked in its own module.
MODEL_CLASSES = {"ChartParser": "chart", "ChartVocab": "chart", "ParsingVocab": "parser", "RNNSeq2Seq": "rnn", "ChartConfig": "chart", "RNNConfig": "rnn"}
KIND_NAMES = {"transformer", "rnn", "seq2seq-parser", "chart"}

def test_model_kinds_are_asked_not_sniffed():
    bad = []
    for p in modules():
        if p.stem == "kinds": continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance" and len(n.args) == 2:
                names = {x.id for x in ast.walk(n.args[1]) if isinstance(x, ast.Name)}
                bad += [f"{p.stem}.py line {n.lineno}: isinstance(..., {c})" for c in names if MODEL_CLASSES.get(c, p.stem) != p.stem]
            if isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute) and n.left.attr in ("kind", "name"):
                lits = {c.value for c in n.comparators if isinstance(c, ast.Constant)}
                if lits & KIND_NAMES: bad.append(f"{p.stem}.py line {n.lineno}: {ast.unparse(n)}")
    assert not bad, bad
