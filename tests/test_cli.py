"`at-train copy` as a user runs it: a subprocess, a checkpoint that rebuilds its own model, exact-match accuracy."
import json, os, shutil, subprocess, sys, pytest, torch
from annotated_transformer.model import load_model
from annotated_transformer.copy_task import copy_accuracy

def at_train(*args, cwd):
    exe = shutil.which("at-train")
    cmd = [exe] if exe else [sys.executable, "-c", "import sys; from annotated_transformer.cli import train_main; sys.exit(train_main())"]
    return subprocess.run(cmd + list(args), cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})

def test_short_run_writes_a_self_describing_checkpoint(tmp_path):
    r = at_train("copy", "--steps", "40", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "exact-match accuracy on 1000 fresh sequences" in r.stdout
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    model = load_model(tmp_path / "run" / "model.pt")  # no flags: the config is inside
    assert model.cfg.__dict__ == res["config"]
    acc, _, _ = copy_accuracy(model, n=100)
    assert 0.0 <= acc <= 1.0 and res["steps"] == 40

def test_bad_task_name(tmp_path):
    r = at_train("kopy", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice: 'kopy'" in r.stderr

@pytest.mark.slow
def test_full_copy_run_reaches_99_percent(tmp_path):
    r = at_train("copy", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    print(r.stdout[-800:])
    assert res["exact_match"] >= 0.99, res
