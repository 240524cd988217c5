import io, os, pathlib, sys, types, warnings, pytest, torch

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("AT_DATA_DIR", REPO.parent / "shared" / "data"))

def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (long training runs; CI runs them after the quick set)")

def _run_slow(config) -> bool:
    "Slow tests run with --slow, with a -m expression that names them, or with AT_SLOW=1."
    return config.getoption("--slow") or "slow" in (config.getoption("markexpr") or "") or os.environ.get("AT_SLOW") == "1"

def pytest_configure(config):
    for name, why in [("slow", "long-running (nbdev flag `slow`)"), ("cuda", "needs a CUDA GPU (nbdev flag `cuda`)"),
                      ("multigpu", "needs several GPUs (nbdev flag `multigpu`)")]:
        config.addinivalue_line("markers", f"{name}: {why}")

def pytest_collection_modifyitems(config, items):
    run_slow = _run_slow(config)
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with `pytest --slow` (or -m slow)"))
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="no CUDA device"))
        if "multigpu" in item.keywords and torch.cuda.device_count() < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 or more CUDA devices"))

@pytest.fixture(autouse=True)
def cpu_without_native_bf16(monkeypatch):
    """Every test runs as on a CPU without native bf16, so precision 'auto' is fp32 on any machine and numerical tests do not
    depend on the CPU kind; tests of 'auto' itself patch `cpu_flags` again. (Subprocesses see the real CPU.) Yields the real reader."""
    from annotated_transformer import train
    real = train.cpu_flags
    monkeypatch.setattr(train, "cpu_flags", lambda: {"fpu", "sse2", "avx2"})
    yield real

@pytest.fixture
def shared_data():
    "Path of ../shared/data (or $AT_DATA_DIR); skips the test when it is absent."
    if not SHARED_DATA.is_dir(): pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA

@pytest.fixture
def cli(capfd, monkeypatch):
    """Run a console script's entry function (`annotated_transformer.cli.*_main`) in this process, as the installed command would
    with these arguments: `cli(main, *args, stdin=None)` -> an object with `returncode`, `stdout`, `stderr` (like
    `subprocess.run`). Quicker than a fresh interpreter (no second torch import); a few tests per script still run the real
    command in a subprocess."""
    def run(main, *args, stdin: str | bytes | None = None):
        capfd.readouterr()
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else stdin
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        with warnings.catch_warnings():  # warnings go to stderr, as in a fresh interpreter (not to pytest's recorder)
            warnings.simplefilter("default")
            warnings.showwarning = lambda m, c, f, l, file=None, line=None: sys.stderr.write(warnings.formatwarning(m, c, f, l, line))
            try: rc = main([str(a) for a in args])
            except SystemExit as e: rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)  # argparse: exit 2
        out, err = capfd.readouterr()
        return types.SimpleNamespace(returncode=rc or 0, stdout=out, stderr=err)
    return run
