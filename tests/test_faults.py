"""Faults the bad-input table cannot drive in-process (issue 27): two runs on one run directory, damaged checkpoints, a full
disk, an interrupted at-evaluate, Ctrl-C while the command starts, a finished run resumed, and the Python API's own checks
(`TransformerConfig`, `make_model`, `beam_search`, `greedy_decode`). Console-script rows of the same faults are in test_bad_input.ROWS."""
import json, os, signal, subprocess, sys, textwrap, time
from dataclasses import asdict
from pathlib import Path
import pytest, torch
from conftest import write_tiny_multi30k
from annotated_transformer.commands.cli import train_main, translate_main, evaluate_main
from annotated_transformer.engine.checkpoint import (CheckpointError, list_checkpoints, load_checkpoint,
                                              save_checkpoint, make_checkpoint, write_checkpoint)
from annotated_transformer.engine.config import TransformerConfig, TrainConfig, config_from_dict
from annotated_transformer.before.background import RNNConfig
from annotated_transformer.architecture.model import make_model
from annotated_transformer.training.decode import beam_search, greedy_decode

REPO = Path(__file__).resolve().parents[1]
COPY = ["--max-steps", "2", "--copy-n", "100", "--n-valid", "10", "--eval-every", "0", "--no-progress", "--device", "cpu",
        "--precision", "fp32", "--save-every", "1", "--keep-last", "5", "--log-every", "1"]

def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}

def files(d: Path) -> dict:
    "Every file under `d` -> its bytes (what a refused or finished command must leave as it was)."
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

@pytest.fixture
def copy_run(tmp_path, cli):
    run = tmp_path / "run"
    r = cli(train_main, "copy", "--run-dir", str(run), *COPY)
    assert r.returncode == 0, r.stderr
    return run

# ---------------------------------------------------------------- one run per directory

def test_second_at_train_on_a_run_dir_is_refused_and_a_dead_holder_does_not_block(tmp_path, cli):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from annotated_transformer.engine.runs import lock_run
        lock_run({str(run)!r}, "at-train copy --run-dir {run}"); print("held", flush=True); time.sleep(120)""")],
        env=env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = cli(train_main, "copy", "--run-dir", str(run), *COPY)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"in use by another run (pid {holder.pid}" in r.stderr and "at-train copy" in r.stderr, r.stderr
        assert sorted(p.name for p in run.iterdir()) == [".lock"]  # the refused run wrote nothing
    finally:
        holder.send_signal(signal.SIGKILL); holder.wait()
    assert (run / ".lock").exists()  # the dead holder's file is left; its lock is not
    r = cli(train_main, "copy", "--run-dir", str(run), *COPY)
    assert r.returncode == 0, r.stderr
    assert not (run / ".lock").exists() and load_checkpoint(run).step == 2

def test_a_lock_released_while_another_opens_it_is_held_once(tmp_path):
    """The race of issue 72: B opens `.lock`, A releases it (unlink, close), B's flock then takes the unlinked file, and C,
    finding no file, makes a new one and locks that: two holders. B must see that its file is gone and lock the new one."""
    from annotated_transformer.engine.runs import lock_run, unlock_run, RunInUseError
    run = tmp_path / "run"
    lock_run(run, "A")  # A: this process
    b = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys, time
        from annotated_transformer.engine.runs import lock_run
        real, first = fcntl.flock, [True]
        def flock(fd, op):  # B has opened the lock file: wait for A to release it, then lock what was opened
            if first: first.clear(); print("opened", flush=True); sys.stdin.readline()
            return real(fd, op)
        fcntl.flock = flock
        lock_run({str(run)!r}, "B"); print("held", flush=True); time.sleep(120)""")],
        env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert b.stdout.readline().strip() == "opened"
        unlock_run(run)  # A lets go between B's open and B's flock
        b.stdin.write("go\n"); b.stdin.flush()
        assert b.stdout.readline().strip() == "held"
        with pytest.raises(RunInUseError, match=f"pid {b.pid} .*: B"):  # C, this process again: B holds the file at the path
            try: lock_run(run, "C")
            except RunInUseError: raise
            else: unlock_run(run)  # C got it too (the old lock_run): release it before failing
    finally:
        b.kill(); b.wait()
    lock_run(run, "D"); unlock_run(run)  # B's death freed it

def test_resume_of_a_finished_run_changes_nothing(copy_run, cli):
    before = files(copy_run)
    r = cli(train_main, "copy", "--run-dir", str(copy_run), *COPY, "--resume")
    assert r.returncode == 0, r.stderr
    assert "already reached step 2 of --max-steps 2; nothing to do" in r.stdout
    assert files(copy_run) == before  # no validation record appended, run.json and checkpoints untouched

def test_resume_from_a_run_of_another_task_names_both(copy_run, cli, tmp_path):
    data = write_tiny_multi30k(tmp_path, 8)
    r = cli(train_main, "multi30k", "--data-dir", str(data), "--no-download", "--run-dir", str(copy_run), "--resume",
            "--max-steps", "3", "--no-progress", "--device", "cpu")
    assert r.returncode == 1 and "at-train copy" in r.stderr and "multi30k" in r.stderr, r.stderr

# ---------------------------------------------------------------- damaged checkpoints

def flip(path: Path, key: str = "src_embed.0.lut.weight", n: int = 64):
    "Flip `n` bytes of one tensor inside a checkpoint file, where its bytes are stored (torch still loads the file)."
    raw, t = path.read_bytes(), torch.load(path, weights_only=True)["model"][key]
    at = raw.find(t.numpy().tobytes()[:256]); assert at > 0
    path.write_bytes(raw[:at] + bytes(b ^ 0xFF for b in raw[at:at + n]) + raw[at + n:])

def test_flipped_bytes_and_nan_weights_are_damage(copy_run, cli, capfd):
    key = next(k for k in torch.load(list_checkpoints(copy_run)[-1], weights_only=True)["model"] if "weight" in k)
    newest = list_checkpoints(copy_run)[-1]
    flip(newest, key)
    assert torch.load(newest, weights_only=True)["step"] == 2  # loads without complaint in torch ...
    with pytest.raises(CheckpointError, match="differ from the checksum"): load_checkpoint(newest)  # ... not here
    assert load_checkpoint(copy_run).step == 1  # the run falls back to its last intact checkpoint, with a warning
    assert "skipped" in capfd.readouterr().err
    ck = load_checkpoint(list_checkpoints(copy_run)[0])
    ck.weights = {k: v.clone() for k, v in ck.weights.items()}; ck.weights[key][0] = float("nan")
    write_checkpoint(ck, copy_run / "nan.pt")  # a valid checksum over NaN weights
    with pytest.raises(CheckpointError, match="NaN or infinite"): load_checkpoint(copy_run / "nan.pt")
    r = cli(translate_main, "--checkpoint", str(copy_run / "nan.pt"), "--input", "-", stdin="a b\n")
    assert r.returncode == 1 and "NaN or infinite" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

def test_resume_skips_a_checkpoint_with_nan_weights(copy_run, cli):
    p = list_checkpoints(copy_run)[-1]
    ck = load_checkpoint(p)
    ck.weights = {k: v.clone().fill_(float("nan")) if v.is_floating_point() else v for k, v in ck.weights.items()}
    write_checkpoint(ck, p)
    r = cli(train_main, "copy", "--run-dir", str(copy_run), *COPY, "--resume", "--max-steps", "3")
    assert r.returncode == 0, r.stderr
    assert "NaN or infinite" in r.stderr and "resumed from" in r.stdout and "ckpt_0000001.pt at step 1" in r.stdout
    assert load_checkpoint(copy_run).step == 3

def test_every_writer_stores_a_checksum(copy_run, tmp_path):
    from annotated_transformer.engine.checkpoint import save_model, average_checkpoints, state_checksum
    raw = torch.load(list_checkpoints(copy_run)[-1], weights_only=True)
    assert raw["checksum"] == state_checksum(raw)  # the trainer's
    save_model(make_model(TransformerConfig.tiny()), tmp_path / "m.pt")
    average_checkpoints(list_checkpoints(copy_run), tmp_path / "avg.pt")
    for name in ("m.pt", "avg.pt"):
        raw = torch.load(tmp_path / name, weights_only=True)
        assert raw["checksum"] == state_checksum(raw), name

# ---------------------------------------------------------------- a full disk (a file-size limit makes writes fail for real)

FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
"""

def test_a_full_disk_names_the_file_and_leaves_no_torn_checkpoint(tmp_path):
    code = FULL_DISK.format(limit=20000) + textwrap.dedent(f"""
        from annotated_transformer.engine.checkpoint import save_checkpoint, make_checkpoint
        from annotated_transformer.engine.config import TransformerConfig
        from annotated_transformer.architecture.model import make_model
        try: save_checkpoint(make_checkpoint(make_model(TransformerConfig.tiny()), step=1), {str(tmp_path)!r}, 1)
        except OSError as e: print(e); sys.exit(3)""")
    r = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert f"{tmp_path / 'ckpt_0000001.pt'}: could not be written" in r.stdout and "disk full" in r.stdout, r.stdout
    assert "unexpected pos" not in r.stdout and list(tmp_path.iterdir()) == []

def test_a_full_disk_leaves_no_empty_tokenizer(tmp_path):
    code = FULL_DISK.format(limit=3000) + textwrap.dedent(f"""
        from annotated_transformer.training.data import SubwordTokenizer
        tok = SubwordTokenizer.train(["ein mann läuft auf dem gras", "ein hund sitzt im park"] * 50, vocab_size=300)
        try: tok.save({str(tmp_path / 'tok')!r})
        except OSError as e: print(e); sys.exit(3)""")
    r = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert "spm.model: could not be written" in r.stdout, r.stdout
    assert not (tmp_path / "tok" / "spm.model").exists() and not list((tmp_path / "tok").glob("*.tmp"))

def test_at_bench_finds_an_unwritable_out_before_benchmarking(tmp_path):
    code = FULL_DISK.format(limit=1) + textwrap.dedent(f"""
        from annotated_transformer.commands.experiments import bench_main
        sys.exit(bench_main(["--presets", "tiny", "--benchmarks", "train", "--reps", "1", "--out", {str(tmp_path / 'b.json')!r}]))""")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert r.returncode == 1 and "--out" in r.stderr and "not a writable directory" in r.stderr, r.stderr
    assert "train" not in r.stderr.split("error:")[0]  # failed before the first benchmark logged anything
    assert not (tmp_path / "b.json").exists()

# ---------------------------------------------------------------- an interrupted at-evaluate

def test_sigterm_during_at_evaluate_leaves_the_earlier_results_whole(tmp_path, cli):
    data = write_tiny_multi30k(tmp_path, 400)
    run = tmp_path / "run"
    r = cli(train_main, "multi30k", "--data-dir", str(data), "--no-download", "--run-dir", str(run), "--vocab-size", "320",
            "--d-model", "32", "--d-ff", "64", "--n-heads", "2", "--n-layers", "1", "--max-len", "64", "--max-steps", "2",
            "--warmup-steps", "2", "--eval-every", "0", "--max-tokens", "400", "--precision", "fp32", "--device", "cpu",
            "--no-progress", "--save-every", "1")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "res"; out.mkdir()
    for name in ("results.json", "test.beam.txt", "test.greedy.txt", "metrics.jsonl", "notes.md"): (out / name).write_text("OLD\n")
    before = files(out)
    p = subprocess.Popen([sys.executable, "-c", "import sys; from annotated_transformer import at_evaluate; sys.exit(at_evaluate())",
                          str(run), "--test", "test", "--out", str(out), "--average", "2", "--beam", "4", "--batch-size", "4"],
                         env=env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = ""
    while "test: " not in seen and p.poll() is None: seen += p.stderr.read(1)  # it is decoding the test split
    p.send_signal(signal.SIGTERM)
    rest = p.stderr.read(); p.wait()
    assert p.returncode == 143, seen + rest
    assert "terminated" in rest and "Traceback" not in rest, rest
    assert files(out) == before  # the old set, whole; no .tmp, no staging directory
    assert sorted(x.name for x in out.iterdir()) == sorted(before)

def test_write_result_set_replaces_all_files_together(tmp_path):
    from annotated_transformer.engine.evaluation import write_result_set
    write_result_set(tmp_path, {"a.txt": "1\n", "b.json": b"{}"})
    (tmp_path / ".partial-999999999").mkdir()  # what a process killed with SIGKILL left (that pid is not alive)
    write_result_set(tmp_path, {"a.txt": "2\n", "b.json": b"[]"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json"]
    assert (tmp_path / "a.txt").read_text() == "2\n" and (tmp_path / "b.json").read_bytes() == b"[]"

# ---------------------------------------------------------------- Ctrl-C while the command starts (torch is imported)

def test_ctrl_c_while_starting_is_one_line():
    code = textwrap.dedent("""
        import builtins, sys
        real = builtins.__import__
        def interrupted(name, *a, **k):  # Ctrl-C arrives while torch is imported
            if name == "torch" or name.startswith("torch."): raise KeyboardInterrupt
            return real(name, *a, **k)
        import annotated_transformer
        builtins.__import__ = interrupted
        sys.exit(annotated_transformer.at_train())""")
    r = subprocess.run([sys.executable, "-c", code, "copy"], env=env(), capture_output=True, text=True)
    assert r.returncode == 130 and r.stderr.strip() == "at-train: interrupted while starting", r.stderr

def test_console_scripts_point_at_the_guarded_entries():
    import configparser, annotated_transformer
    from annotated_transformer.commands import cli, experiments
    cfg = configparser.ConfigParser(); cfg.read(REPO / "settings.ini")
    scripts = dict(s.split("=") for s in cfg["DEFAULT"]["console_scripts"].split())
    assert set(scripts) == {"at-train", "at-translate", "at-evaluate", "at-parse", "at-variations", "at-bench"}
    for name, target in scripts.items():
        mod, func = target.split(":")
        entry = getattr(annotated_transformer, func).__name__  # the guarded entry is named as the function it loads
        assert mod == "annotated_transformer" and entry in dir(experiments if name in ("at-variations", "at-bench") else cli), target

# ---------------------------------------------------------------- the Python API a reader calls directly

def test_free_memory_is_the_containers_where_its_limit_leaves_less(tmp_path, tiny, monkeypatch):
    """On a CPU, the free memory is MemAvailable or what the memory cgroup (cgroup v2, or v1) leaves below its limit,
    whichever is less: in a container MemAvailable is the host's. No limit ("max", or v1's huge number) or no files:
    MemAvailable; nothing readable: None. The refusal counts one sentence and one beam in the singular."""
    import annotated_transformer.training.decode as decode_module
    cpu, GiB = torch.device("cpu"), 2**30
    (tmp_path / "meminfo").write_text("MemTotal:       41943040 kB\nMemAvailable:   20971520 kB\n")  # 20 GiB
    free = lambda root: decode_module.free_memory(cpu, str(tmp_path / root), str(tmp_path / "meminfo"))
    v2, v1 = tmp_path / "v2", tmp_path / "v1" / "memory"
    v2.mkdir(); v1.mkdir(parents=True)
    assert free("none") == 20 * GiB  # no cgroup files
    (v2 / "memory.max").write_text(f"{GiB}\n"); (v2 / "memory.current").write_text(f"{3 * GiB // 4}\n")
    assert free("v2") == GiB // 4
    (v2 / "memory.current").write_text(f"{2 * GiB}\n")
    assert free("v2") == 0  # already past its limit: nothing is free
    (v2 / "memory.max").write_text("max\n")
    assert free("v2") == 20 * GiB
    (v1 / "memory.limit_in_bytes").write_text(f"{2 * GiB}\n"); (v1 / "memory.usage_in_bytes").write_text(f"{GiB}\n")
    assert free("v1") == GiB
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1 without a limit
    assert free("v1") == 20 * GiB
    assert decode_module.free_memory(cpu, str(tmp_path / "none"), str(tmp_path / "absent")) is None
    monkeypatch.setattr(decode_module, "free_memory", lambda device: 0)
    with pytest.raises(ValueError, match=r"^beam_size=1: 1 sentence of 1 beam needs at least 0.0 GiB, 0.0 GiB is free"):
        beam_search(tiny, SRC, beam_size=1)

@pytest.mark.parametrize("kw,error,words", [
    (dict(d_model="512"), TypeError, "d_model='512': expected int"),
    (dict(n_heads=4.0), TypeError, "n_heads=4.0: expected int"),
    (dict(dropout="0.1"), TypeError, "dropout='0.1'"),
    (dict(norm_first=1), TypeError, "norm_first=1"),
    (dict(d_k=8.0), TypeError, "d_k=8.0"),
])
def test_transformer_config_refuses_wrong_types_by_name(kw, error, words):
    with pytest.raises(error, match=words): TransformerConfig(**kw)

def test_configs_take_what_they_always_took():
    assert TransformerConfig(dropout=0, d_k=None).dropout == 0  # an int for a float
    assert TrainConfig(betas=[0.9, 0.98]).betas == [0.9, 0.98]  # a list for the tuple
    with pytest.raises(TypeError, match="max_steps=2.5"): TrainConfig(max_steps=2.5)

@pytest.mark.parametrize("make,got,hint", [
    (lambda: asdict(TransformerConfig.tiny(src_vocab_size=11, tgt_vocab_size=11)), "dict", True),  # a checkpoint's stored config
    (lambda: dict(n_layers=1), "dict", True),
    (lambda: RNNConfig(), "RNNConfig", False),  # another kind's config: its own builder, not a dict hint
    (lambda: None, "NoneType", False),
], ids=["checkpoint-dict", "dict", "rnn-config", "none"])
def test_make_model_refuses_what_is_not_a_transformer_config(make, got, hint):
    "One line naming the argument, what was expected and what came; for a dict, how to build the config from it."
    with pytest.raises(TypeError) as e: make_model(make())
    msg = str(e.value)
    assert msg.startswith(f"make_model: cfg must be a TransformerConfig, got {got}") and "\n" not in msg, msg
    assert ("config_from_dict(TransformerConfig, d)" in msg) == hint, msg
    if hint:  # the hint works
        assert make_model(config_from_dict(TransformerConfig, make())).cfg == TransformerConfig(**make())

@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return make_model(TransformerConfig.tiny(src_vocab_size=11, tgt_vocab_size=11)).eval()

SRC = torch.tensor([[4, 5, 6]])

def test_a_search_that_could_never_fit_is_refused_before_it_starts(tiny, monkeypatch):
    """A beam (or batch) whose rows' log-probabilities alone exceed the free memory is refused by name before the
    encoder runs, instead of running the machine out of memory; a beam wider than the vocabulary is fine (11 tokens,
    21 beams: after two steps there are more sequences than beams)."""
    import annotated_transformer.training.decode as decode_module
    src = torch.tensor([[4, 5, 6]] * 3)  # three sentences of three tokens
    assert decode_module.free_memory(torch.device("cpu")) is None or decode_module.free_memory(torch.device("cpu")) > 0
    assert len(beam_search(tiny, src, beam_size=21)) == 3
    for k in (4, 1):  # a beam, and greedy search (`one_beam_search`)
        need = decode_module.search_bytes(tiny, 3 * k)
        assert need == 3 * k * 11 * 4
        with monkeypatch.context() as m:
            m.setattr(decode_module, "free_memory", lambda device: need - 1)
            m.setattr(tiny, "encode", lambda *a, **kw: pytest.fail("the search started"))
            with pytest.raises(ValueError, match=rf"^beam_size={k}: 3 sentences of {k} beams? need at least .* is free"):
                beam_search(tiny, src, beam_size=k)
        with monkeypatch.context() as m:
            m.setattr(decode_module, "free_memory", lambda device: need)  # just enough: it searches
            assert len(beam_search(tiny, src, beam_size=k)) == 3

@pytest.mark.parametrize("kw,error,words", [
    (dict(beam_size=0), ValueError, "beam_size=0"), (dict(beam_size=-2), ValueError, "beam_size=-2"),
    (dict(beam_size=2.0), TypeError, "beam_size=2.0"), (dict(max_len_b=-1), ValueError, "max_len_b=-1"),
    (dict(max_len_a=float("nan")), ValueError, "max_len_a=nan"), (dict(alpha=-0.5), ValueError, "alpha=-0.5"),
    (dict(n_best=5), ValueError, "n_best=5"),
    (dict(src=torch.tensor([[4, 11]])), ValueError, "token id 11 is outside"),
    (dict(src=torch.tensor([[-1, 4]])), ValueError, "token id -1 is outside"),
    (dict(src=torch.zeros(1, 0, dtype=torch.long)), ValueError, "src: empty"),
    (dict(src=torch.zeros(0, 3, dtype=torch.long)), ValueError, "src: empty"),
    (dict(src=torch.tensor([[4.0, 5.0]])), TypeError, "src: expected token ids"),
    (dict(src=[4, 5]), TypeError, "src: expected token ids"),
    (dict(src_key_padding_mask=torch.zeros(1, 2, dtype=torch.bool)), ValueError, "src_key_padding_mask"),
    (dict(alpha=1e5), ValueError, "alpha=100000.0: expected at most 10"),  # the length penalty would overflow
    (dict(max_len_a=0, max_len_b=0), ValueError, "max_len_b=0: with max_len_a=0"),  # no output token: no hypothesis
])
def test_beam_search_refuses_bad_arguments_by_name(tiny, kw, error, words):
    args = {**dict(src=SRC), **kw}
    with pytest.raises(error, match=words.replace("(", r"\(")): beam_search(tiny, **args)

def test_greedy_decode_checks_the_same_arguments(tiny):
    with pytest.raises(ValueError, match="max_len_b=-3"): greedy_decode(tiny, SRC, max_len_b=-3)
    with pytest.raises(ValueError, match="outside"): greedy_decode(tiny, torch.tensor([[99]]))
    assert greedy_decode(tiny, SRC, max_len_b=2).shape[0] == 1  # good arguments still decode

# ---------------------------------------------------------------- at-evaluate's result set: whole, and checked before decoding

def test_a_signal_during_the_publishing_renames_waits_for_them(tmp_path, monkeypatch):
    """SIGTERM taken by another thread (the kernel may pick any thread once at-evaluate has several) while the set is renamed into
    place: Python runs the handler in the main thread at once, so blocking the signal in this thread did not hold it; every file is
    replaced before it acts."""
    import os, threading, time
    import annotated_transformer.engine.evaluation as E
    E.write_result_set(tmp_path, {"a.txt": "old\n", "b.txt": "old\n"})
    other = threading.Thread(target=time.sleep, args=(3,), daemon=True); other.start()
    real, into_out = os.replace, []
    def replace_then_signal(a, b):
        real(a, b)
        if Path(b).parent == tmp_path:
            into_out.append(b)
            if len(into_out) == 1: signal.pthread_kill(other.ident, signal.SIGTERM); time.sleep(0.3)
    class Stop(Exception): pass
    def stop(n, f): raise Stop()
    old = signal.signal(signal.SIGTERM, stop)
    monkeypatch.setattr(E.os, "replace", replace_then_signal)
    try:
        with pytest.raises(Stop): E.write_result_set(tmp_path, {"a.txt": "new\n", "b.txt": "new\n"})
    finally: signal.signal(signal.SIGTERM, old)
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text() == "new\n"

def test_evaluate_checks_its_output_before_decoding_and_leaves_nothing(tmp_path, monkeypatch):
    "A full disk at --out is found before any decoding, and the directory at-evaluate made for it is gone again."
    import errno
    import annotated_transformer.engine.checkpoint as C, annotated_transformer.engine.evaluation as E
    run = tmp_path / "run"; run.mkdir(); (run / "metrics.jsonl").write_text("")
    monkeypatch.setattr(E, "training_summary", lambda d: {})
    decoded = []
    monkeypatch.setattr(E, "checkpoint_candidates", lambda *a, **k: decoded.append(a) or {})
    def full(path, data): raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(C, "atomic_write", full)
    out = tmp_path / "res"
    with pytest.raises(CheckpointError, match="No space left on device"): E.evaluate_run(run, None, None, out)
    assert not decoded and not out.exists()


# ---------------------------------------------------------------- issue 63: a checkpoint that cannot be read says so in our words
@pytest.mark.parametrize("content", [b"hello\n", bytes(range(256)) * 2])
def test_an_unreadable_checkpoint_is_one_line_without_pytorchs_text(tmp_path, content):
    "A text file or random bytes given as a checkpoint: one line naming the file, not PyTorch's pages-long (and cut) message."
    from annotated_transformer.engine.checkpoint import load_checkpoint, CheckpointError
    p = tmp_path / "notes.pt"; p.write_bytes(content)
    with pytest.raises(CheckpointError) as e: load_checkpoint(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: not a readable checkpoint") and "\n" not in msg and "weights_only" not in msg and "torch.load" not in msg, msg

def test_a_missing_run_says_to_train_it_first(tmp_path):
    from annotated_transformer.engine.checkpoint import load_checkpoint, CheckpointError
    with pytest.raises(CheckpointError, match="checkpoint not found .*train it first"): load_checkpoint(tmp_path / "runs" / "ptb-sample")

# ---------------------------------------------------------------- issue 72: a refused pickle is our one line, not torch's warning first
class _Evil:
    "What a malicious checkpoint holds: unpickling it would run a shell command."
    def __reduce__(self): return (os.system, ("echo unpickled",))

def test_a_refused_malicious_pickle_is_one_line_without_torchs_warning(copy_run, tmp_path, cli, capfd):
    """A pickle of more than tensors and plain data (here written by `pickle`, protocol 4) is refused; torch's two-line
    'Detected pickle protocol 4' warning came first, twice when the file was skipped in a run directory."""
    import pickle, shutil, warnings
    evil = tmp_path / "evil.pt"; evil.write_bytes(pickle.dumps({"model": _Evil(), "model_config": {}}, protocol=4))
    r = cli(translate_main, "--checkpoint", evil, stdin="ein hund\n")
    assert r.returncode == 1 and r.stderr.splitlines() == [
        f"at-translate: error: {evil}: not a readable checkpoint: not a file torch.save wrote, cut short, or a pickle of more "
        "than tensors and plain data (UnpicklingError)"], r.stderr
    run = tmp_path / "damaged"; shutil.copytree(copy_run, run)
    shutil.copy(evil, run / "ckpt_0000009.pt"); (run / "latest").write_text("ckpt_0000009.pt\n")  # the newest: skipped, in one line
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert load_checkpoint(run).step == 2
    err = capfd.readouterr().err
    assert not caught and err.splitlines() == [f"warning: skipped {run / 'ckpt_0000009.pt'}: not a readable checkpoint: not a file "
        "torch.save wrote, cut short, or a pickle of more than tensors and plain data (UnpicklingError); using ckpt_0000002.pt"], (caught, err)


def test_a_huge_length_limit_is_the_model_s_own(tiny):
    "max_len_a=1e30 overflowed the integer limit to a negative one: no step ran and no hypothesis came back"
    hyps = beam_search(tiny, SRC, max_len_a=1e30, beam_size=2)
    assert len(hyps) == 1 and hyps[0] and len(hyps[0][0].tokens) >= 1
    assert greedy_decode(tiny, SRC, max_len_a=1e30).size(1) >= 2

@pytest.mark.parametrize("kw,words", [
    (dict(pad_idx=99), "pad_idx=99: expected a token id in 0..10"), (dict(bos_idx=-3), "bos_idx=-3"),
    (dict(eos_idx=11), "eos_idx=11"),
])
def test_transformer_config_refuses_special_ids_outside_its_vocabulary(kw, words):
    with pytest.raises(ValueError, match=words): TransformerConfig.tiny(src_vocab_size=11, tgt_vocab_size=11, **kw)

@pytest.mark.parametrize("seed", [-1, 2**32, 10**20])
def test_train_config_refuses_a_seed_numpy_and_torch_cannot_take(seed):
    with pytest.raises(ValueError, match=f"seed={seed}: expected an integer from 0"): TrainConfig(seed=seed)

def test_served_models_refuse_a_batch_size_below_one_and_translate_refuses_a_str():
    from annotated_transformer import pretrained
    from annotated_transformer.translation.inference import translate
    tr, ps = pretrained("multi30k-de-en"), pretrained("ptb-chart")
    for bad in (0, -1):  # -1 returned [''] and [None] (no batch), 0 a range() error
        with pytest.raises(ValueError, match=f"batch_size={bad}: expected an integer >= 1"): tr.translate(["ein hund"], batch_size=bad)
        with pytest.raises(ValueError, match=f"batch_size={bad}: expected an integer >= 1"): ps.parse(["a dog ."], batch_size=bad)
    with pytest.raises(TypeError, match="batch_size=2.0"): tr.translate(["ein hund"], batch_size=2.0)
    with pytest.raises(TypeError, match="lines: a str; expected a list"): translate(tr.model, tr.tokenizer, "ein hund")  # each character a sentence
    with pytest.raises(ValueError, match="batch_size=0"): translate(tr.model, tr.tokenizer, ["ein hund"], batch_size=0)
    with pytest.raises(TypeError, match="batch_size=2.0: expected an integer"): translate(tr.model, tr.tokenizer, ["ein hund"], batch_size=2.0)


@pytest.mark.parametrize("size,words", [(30, r"vocab_size=30: expected at least \d+, an id for each character"),
                                        (5000, r"vocab_size=5000: expected at most \d+ for this text")])
def test_a_vocabulary_size_the_text_cannot_have_names_vocab_size(size, words):
    "sentencepiece's own error named --character_coverage, an option at-train does not have"
    from annotated_transformer.engine.tasks import trained_tokenizer
    from annotated_transformer.training.data import Corpus
    text = [f"the quick brown fox {i} jumps over the lazy dog éàü" for i in range(200)]
    with pytest.raises(ValueError, match=words): trained_tokenizer(Corpus(text, text, "t", "train"), size)
