"`at-train` as a user runs it: one command line for every task, help for every option, the copy task end to end."
import json, os, shutil, subprocess, sys, pytest, torch
from annotated_transformer.commands.cli import train_argparser, parse_args, find_task, train_main
from annotated_transformer.engine.tasks import TASKS
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.training.copy_task import copy_accuracy
from conftest import assert_closing_lines

def at_train(*args, cwd, timeout=900):
    exe = shutil.which("at-train")
    cmd = [exe] if exe else [sys.executable, "-c", "import sys; from annotated_transformer.commands.cli import train_main; sys.exit(train_main())"]
    return subprocess.run(cmd + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})

def test_short_run_writes_a_self_describing_checkpoint(tmp_path):
    "Options before the task name and after it, dashed spellings; the run prints its precision and shows a progress bar."
    r = at_train("--max-steps", "40", "copy", "--eval-every", "0", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "exact-match accuracy on 1000 fresh sequences" in r.stdout
    assert_closing_lines(r.stdout)
    assert "; exact match " in r.stdout.splitlines()[-2] and "results in " in r.stdout.splitlines()[-1]
    assert r.stdout.count("precision ") >= 1 and "(auto: " in r.stdout  # the choice and its reason, said once
    assert "train:" in r.stderr and "40/40" in r.stderr  # the progress bar, as for every task
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    model = load_checkpoint(tmp_path / "run" / "ckpt_0000040.pt").build()  # no flags: the config is inside
    assert model.cfg.__dict__ == res["config"]
    acc, _, _ = copy_accuracy(model, n=100)
    assert 0.0 <= acc <= 1.0 and res["steps"] == 40 and res["precision"] in ("fp32", "bf16")
    assert res["hardware"]["cpu"] and res["train_seconds"] > 0

def test_bad_task_name(tmp_path, cli):
    r = cli(train_main, "kopy")
    assert r.returncode == 2 and "invalid choice: 'kopy'" in r.stderr

def test_help_lists_every_task_with_a_description(tmp_path, cli):
    r = cli(train_main, "--help")
    assert r.returncode == 0, r.stderr
    for name in ("copy", "multi30k", "iwslt14", "wmt14-base", "wmt14-big", "ptb", "ptb-small", "ptb-sample"):
        line = next(l for l in r.stdout.splitlines() if l.startswith(f"  {name} "))
        assert len(line.split(maxsplit=1)[1]) > 10, line  # a description, not the bare name
    assert "--max-steps" in r.stdout and "--run-dir" in r.stdout

@pytest.mark.parametrize("task", ["copy", "multi30k", "ptb-small"])
def test_every_option_has_help_and_a_dashed_spelling(task):
    parser = train_argparser(task)
    shown = [a for a in parser._actions if a.option_strings and a.help != "==SUPPRESS==" and a.dest != "help"]
    assert len(shown) > 50
    for a in shown:
        assert a.help and a.help != a.dest, f"{a.option_strings} has no help text"
        assert not any("_" in o for o in a.option_strings), a.option_strings
    hidden = {o for a in parser._actions if a.help == "==SUPPRESS==" for o in a.option_strings}
    assert {"--max_steps", "--run_dir", "--data_dir", "--src_lang"} <= hidden  # the underscore spellings still work

def test_copy_takes_the_same_options_as_every_task():
    options = lambda t: {o for a in train_argparser(t)._actions for o in a.option_strings}
    assert options("copy") == options("multi30k") == options("wmt14-big")

def test_dashes_underscores_and_option_order_agree():
    a = parse_args(["--max-steps", "7", "copy", "--run-dir", "r", "--no-progress", "--d-model", "32"])
    b = parse_args(["copy", "--max_steps", "7", "--run_dir", "r", "--no-progress", "--d_model", "32"])
    assert a == b and (a[0], a[1].d_model, a[2].max_steps, a[2].run_dir) == ("copy", 32, 7, "r")
    assert find_task(["--precision", "fp32", "--betas", "0.9", "0.99", "ptb-small"]) == "ptb-small"

def test_unknown_option_is_an_error_with_usage(tmp_path, cli):
    "One line, the error first and where to look after it (no usage block before it), worded as every command words it."
    r = cli(train_main, "copy", "--stepz", "5")
    assert r.returncode == 2 and r.stderr.splitlines() == ["at-train: error: unrecognized arguments: --stepz (see at-train --help)"], r.stderr

def test_tasks_are_values_not_registrations():
    "Importing a module adds no task: TASKS is written out in tasks.py, parsing included, each with its description."
    import importlib, annotated_transformer.parsing.parser, annotated_transformer.engine.evaluation
    before = dict(TASKS)
    for m in ("parsing.parser", "engine.evaluation", "translation.variations", "bench.benchmarks", "commands.cli"): importlib.reload(importlib.import_module(f"annotated_transformer.{m}"))
    assert TASKS == before and {"copy", "multi30k", "ptb", "ptb-small", "ptb-sample"} <= set(TASKS)
    assert all(len(t.description) > 10 and t.build.__name__ in ("build_data", "build_parsing_data", "build_chart_data") for t in TASKS.values())
    assert {"ptb-chart", "ptb-chart-sample"} <= set(TASKS)

@pytest.mark.slow
def test_full_copy_run_reaches_99_percent(tmp_path):
    r = at_train("copy", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    print(r.stdout[-800:])
    assert res["exact_match"] >= 0.99, res

@pytest.mark.parametrize("opt", [["--max-steps", "0"], ["--max-steps", "-3"], ["--keep-last", "0"]])
def test_config_checks_are_one_line_errors(opt, capsys):
    "A value the config itself refuses (TrainConfig.__post_init__) is a usage error, not a traceback."
    from annotated_transformer.commands.cli import parse_args
    with pytest.raises(SystemExit) as e: parse_args(["copy", *opt])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "expected a positive integer" in err[-1] and not any("Traceback" in l for l in err)


def test_at_train_flushes_denormals_first(monkeypatch):
    "at-train turns on flush-to-zero before it reads its options (so before any worker thread starts); here the call is recorded."
    import annotated_transformer.commands.cli as cli
    calls = []
    monkeypatch.setattr(cli.torch, "set_flush_denormal", lambda on: calls.append(on) or True)
    with pytest.raises(SystemExit): cli.train_main(["no-such-task"])
    assert calls == [True]


def test_flush_to_zero_makes_denormals_zero():
    "What the setting does, in a process of its own: a denormal float32 times 1 is 0 with it, and stays itself without it."
    import subprocess, sys
    code = ("import torch; x = torch.tensor([1e-39]); a = (x * 1.0).item(); torch.set_flush_denormal(True); "
            "b = (x * 1.0).item(); print(a > 0, b == 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_in_process_runs_leave_denormals_alone():
    """The conftest fixture `denormals_kept`: each test starts with flush-to-zero off, even after a test ran `at-train` in this
    process (which turns it on for the process), so no later test computes with denormals flushed."""
    import torch
    x = torch.tensor([1e-39])
    assert (x * 1.0).item() > 0  # off at the start of the test
    if not torch.set_flush_denormal(True):  # what an in-process at-train does; the fixture turns it off again after this test
        pytest.skip("this CPU cannot flush denormals to zero")
    assert (x * 1.0).item() == 0


# ---------------------------------------------------------------- issue 63: the commands agree

import argparse, re, signal, time
from annotated_transformer.commands.cli import translate_main, evaluate_main, parse_main, translate_parser, evaluate_parser, parse_parser
from annotated_transformer.commands.experiments import variations_main, bench_main, variations_parser, bench_parser
from annotated_transformer.commands.console import DEVICE_HELP, device_name
from conftest import run_entry

COMMANDS = {  # console script -> (entry function, its parser)
    "at-train": (train_main, lambda: train_argparser("copy")), "at-translate": (translate_main, translate_parser),
    "at-evaluate": (evaluate_main, evaluate_parser), "at-parse": (parse_main, parse_parser),
    "at-variations": (variations_main, variations_parser), "at-bench": (bench_main, bench_parser)}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

@pytest.mark.parametrize("prog", COMMANDS)
def test_help_describes_every_option_and_shows_its_default(prog, cli):
    "Every option in `--help` has a description; an optional one shows its default once, a required one none."
    main, make = COMMANDS[prog]
    r = cli(main, "--help")
    assert r.returncode == 0 and "(default: None)" not in r.stdout, r.stdout
    parser = make()
    fmt = parser._get_formatter()
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS and a.dest != "help"]
    assert len(shown) > 5
    problems = []
    for a in shown:
        name = (a.option_strings or [a.dest])[0]
        h = " ".join(fmt._expand_help(a).split()) if a.help else ""
        if name not in r.stdout: problems.append(f"{name}: not in --help")
        if not h or h == a.dest: problems.append(f"{name}: no description")
        if h.count("default:") > 1: problems.append(f"{name}: its default twice: {h}")
        if a.required and "(default" in h: problems.append(f"{name}: required, but shows a default: {h}")
        on_off = isinstance(a, argparse.BooleanOptionalAction)  # --x / --no-x: its default depends on the task, so it is shown
        if not a.required and (a.nargs != 0 or on_off) and "default" not in h: problems.append(f"{name}: no default shown: {h}")
        if "(default: )" in h: problems.append(f"{name}: an empty default shown as nothing: {h}")
    assert not problems, "\n".join(problems)

def test_an_on_off_option_shows_the_tasks_setting():
    "multi30k trains pre-norm and copy post-norm: each task's --help says which spelling is its default."
    h = lambda task: " ".join(train_argparser(task).format_help().split())
    assert "(default: --norm-first)" in h("multi30k") and "(default: --no-norm-first)" in h("copy")
    assert "--keep-best STR" in h("copy") and "(default: '')" in h("copy")

DEVICE_ARGS = {"at-train": ["copy"], "at-translate": ["--checkpoint", "CK"], "at-parse": ["--checkpoint", "CK"],
               "at-variations": ["--out", "OUT"], "at-bench": [], "at-evaluate": ["RUN", "--test", "test", "--out", "OUT"]}

def test_device_has_one_meaning_and_one_default():
    "`--device` is one option in every script that has one: auto (the default), cpu, cuda or cuda:N."
    have = {prog for prog, (_, make) in COMMANDS.items() if any("--device" in a.option_strings for a in make()._actions)}
    assert have == set(DEVICE_ARGS)  # every script that runs a model, at-evaluate too (evaluate_run decodes on its device)
    for prog in have:
        a = next(a for a in COMMANDS[prog][1]()._actions if "--device" in a.option_strings)
        assert (a.default, a.type, a.help) == ("auto", device_name, DEVICE_HELP), prog
    assert variations_parser().parse_args(["--out", "x"]).device == "auto"  # was cpu
    assert parse_args(["copy"])[2].device == "auto"

@pytest.mark.parametrize("prog", DEVICE_ARGS)
@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:99"])
def test_a_bad_device_is_one_line_and_exit_2(prog, device, capfd, tmp_path):
    if device == "cuda:99" and torch.cuda.device_count() > 99: pytest.skip("a machine with 100 GPUs")
    args = [str(tmp_path / a) if a in ("CK", "OUT", "RUN") else a for a in DEVICE_ARGS[prog]]
    rc, out, err, problems = run_entry(COMMANDS[prog][0], [*args, "--device", device], capfd)
    lines = err.strip().splitlines()
    assert rc == 2 and not problems and len(lines) == 1 and lines[0].startswith(f"{prog}: error: ") and "--device" in lines[0], err
    assert not (tmp_path / "OUT").exists()

# ---- Ctrl-C or SIGTERM while a console script starts (importing torch): one line, 130 or 143

ENTRY = "annotated_transformer:at_train"  # what the installed `at-train` runs (settings.ini)
STAGES = [  # (the first module whose `-X importtime` line has this name; the signal is sent when it is seen)
    lambda m: m.startswith("numpy"),  # deep inside numpy's import, itself inside `import torch`
    lambda m: m == "numpy",  # numpy done, torch still loading
    lambda m: m.startswith("torch.nn"),
    lambda m: m == "torch",  # torch done, the package's own modules still loading
]

def _signal_during_startup(tmp_path, stage, sig):
    "Start at-train under `-X importtime`, send `sig` when the import of `stage` is reported; its status and non-import stderr."
    mod, func = ENTRY.split(":")
    cmd = [sys.executable, "-X", "importtime", "-c", f"import sys; from {mod} import {func}; sys.exit({func}())", "copy",
           "--max-steps", "1", "--eval-every", "0", "--copy-n", "100", "--n-valid", "10", "--no-progress", "--device", "cpu",
           "--precision", "fp32", "--compile", "off", "--run-dir", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, *filter(None, [os.environ.get("PYTHONPATH")])]), "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sent, rest = False, []
    try:
        for line in p.stderr:
            if not line.startswith("import time:"): rest.append(line); continue
            if not sent and stage(line.rsplit("|", 1)[-1].strip()): p.send_signal(sig); sent = True
        p.wait(timeout=300)
    finally:
        if p.poll() is None: p.kill(); p.wait()
    assert sent, "the stage was never reached"
    return p.returncode, [l.rstrip("\n") for l in rest if l.strip()]

@pytest.mark.parametrize("stage", range(len(STAGES)))
def test_ctrl_c_during_startup_is_one_line_and_130(tmp_path, stage):
    "Ctrl-C at any moment of start-up (it used to be ignored inside numpy's import, or became a RecursionError)."
    rc, err = _signal_during_startup(tmp_path, STAGES[stage], signal.SIGINT)
    assert (rc, err) == (130, ["at-train: interrupted"]), (rc, err)
    assert not (tmp_path / "run").exists()  # stopped before any work

def test_sigterm_during_startup_is_one_line_and_143(tmp_path):
    rc, err = _signal_during_startup(tmp_path, STAGES[0], signal.SIGTERM)
    assert (rc, err) == (143, ["at-train: terminated (SIGTERM)"]), (rc, err)

SIGINT_AT = """
import os, signal, sys
class SigintAt:  # this process gets SIGINT as the import of {module!r} begins (once)
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}: sys.meta_path.remove(self); os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, SigintAt())
from {mod} import {func}; sys.exit({func}())"""

@pytest.mark.parametrize("module", ["annotated_transformer.commands.console", "argparse", "textwrap", "annotated_transformer.commands.cli"])
def test_ctrl_c_in_the_first_milliseconds_is_one_line_and_130(tmp_path, module):
    """Ctrl-C while the entry point imports its own start-up module (`console`: argparse and a few more, milliseconds) was a
    traceback (issue 72: 7 times in 20 at 30-55 ms); an import hook sends the signal, so the moment is exact."""
    mod, func = ENTRY.split(":")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, *filter(None, [os.environ.get("PYTHONPATH")])]), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", SIGINT_AT.format(module=module, mod=mod, func=func), "copy", "--run-dir",
                        str(tmp_path / "run")], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert (r.returncode, r.stderr.strip().splitlines()) == (130, ["at-train: interrupted"]), (r.returncode, r.stderr[-2000:])
    assert not (tmp_path / "run").exists()

def test_entry_points_are_the_console_scripts():
    "settings.ini's console scripts reach `console.start` (through the package root's lazy `at_train`, ...)."
    import configparser, importlib
    cfg = configparser.ConfigParser(); cfg.read(os.path.join(REPO, "settings.ini"))
    scripts = dict(s.split("=") for s in cfg["DEFAULT"]["console_scripts"].split())
    assert set(scripts) == {p for p in COMMANDS}
    for prog, target in scripts.items():
        mod, func = target.split(":")
        assert callable(getattr(importlib.import_module(mod), func)), target


def test_the_copy_preset_cooldown_is_a_share_of_the_run(capsys):
    "The copy preset cools down over the last quarter of any --max-steps; a cooldown typed in steps wins and is checked."
    assert TASKS["copy"].train.cooldown_share == 0.25 and TASKS["copy"].train.cooldown_steps == 0
    for argv, steps in ((["copy"], 500), (["copy", "--max-steps", "300"], 75), (["copy", "--max-steps", "20"], 5),
                        (["copy", "--max_steps", "300", "--cooldown_steps", "3"], 3),
                        (["copy", "--max-steps", "300", "--cooldown-share", "0"], 0)):
        assert parse_args(argv)[2].cooldown_length() == steps, argv
    for argv, msg in ((["copy", "--max-steps", "300", "--cooldown-steps", "301"], "--cooldown-steps 301"),
                      (["copy", "--cooldown-share", "1.5"], "--cooldown-share 1.5")):
        with pytest.raises(SystemExit) as e: parse_args(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
