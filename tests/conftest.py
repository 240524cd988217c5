import functools, http.server, io, os, pathlib, random, sys, threading, types, warnings, pytest, torch

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("AT_DATA_DIR", REPO.parent / "shared" / "data"))

LEX = dict(ein="a", mann="man", hund="dog", läuft="runs", sitzt="sits", auf="on", dem="the", gras="grass", rot="red")

def write_tiny_multi30k(d: pathlib.Path, n_eval: int) -> pathlib.Path:
    "Word-for-word German/English pairs (LEX) in the Multi30k layout: d/multi30k/{train,val,test_2016_flickr}.{de,en}; returns d."
    m = d / "multi30k"; m.mkdir()
    rng = random.Random(0)
    for stem, n in (("train", 300), ("val", n_eval), ("test_2016_flickr", n_eval)):
        de = [" ".join(rng.choice(list(LEX)) for _ in range(rng.randint(3, 7))) for _ in range(n)]
        (m / f"{stem}.de").write_text("".join(s + "\n" for s in de), encoding="utf-8")
        (m / f"{stem}.en").write_text("".join(" ".join(LEX[w] for w in s.split()) + "\n" for s in de), encoding="utf-8")
    return d

def assert_closing_lines(stdout: str):
    "The closing lines every `at-train` task prints: time, CPU time, threads, precision, processes; the final metrics in words; the checkpoint."
    import re
    lines = stdout.rstrip().splitlines()[-3:]
    assert len(lines) == 3, stdout[-2000:]
    assert re.fullmatch(r"trained \d+ steps in \d+ s \(\d+ s CPU time, (1 thread|\d+ threads), (fp32|bf16|fp16), "
                        r"(1 process|\d+ processes)\)", lines[0]), lines[0]
    assert re.match(r"final: training loss \d+\.\d{4} per target token \(label-smoothed\)", lines[1]), lines[1]
    assert lines[2].startswith("checkpoint ") and lines[2].split()[1].rstrip(";").endswith(".pt"), lines[2]
    assert "{'" not in stdout  # no raw Python dict

def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (long training runs; CI runs them after the quick set)")

def _run_slow(config) -> bool:
    "Slow tests run with --slow, with a -m expression that names them, or with AT_SLOW=1."
    return config.getoption("--slow") or "slow" in (config.getoption("markexpr") or "") or os.environ.get("AT_SLOW") == "1"

def pytest_configure(config):
    os.environ["AT_CPU_FLAGS"] = NO_NATIVE_BF16  # see cpu_without_native_bf16
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

NO_NATIVE_BF16 = "fpu sse2 avx2"  # the CPU flags every test process, and every process a test starts, reports

@pytest.fixture(autouse=True)
def cpu_without_native_bf16(monkeypatch):
    """Every test runs as on a CPU without native bf16, so precision 'auto' is fp32 on any machine and numerical tests do not
    depend on the CPU kind. It is `$AT_CPU_FLAGS`, which `precision.cpu_flags` reads first, so the processes a test starts (torchrun
    and spawned workers, console scripts) see the same CPU (`pytest_configure` sets it for the whole session, before any
    session fixture starts one); tests of 'auto' itself set other flags. Yields the real reader of /proc/cpuinfo."""
    from annotated_transformer.engine import precision
    monkeypatch.setenv("AT_CPU_FLAGS", NO_NATIVE_BF16)
    def real():
        with monkeypatch.context() as m:
            m.delenv("AT_CPU_FLAGS", raising=False)
            return precision.cpu_flags()
    yield real

@pytest.fixture(autouse=True)
def denormals_kept():
    """`at-train` turns on flush-to-zero for its whole process (`cli.py`), so a test that runs it in this process (the `cli`
    fixture) would leave it on for every later test. Each test starts and ends with it off, as a fresh interpreter has it."""
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)

@pytest.fixture
def shared_data():
    "Path of ../shared/data (or $AT_DATA_DIR); skips the test when it is absent."
    if not SHARED_DATA.is_dir(): pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA

def run_entry(main, argv: list[str], capfd) -> tuple[int, str, str, list[str]]:
    """Call a console script's entry function as its wrapper would (`sys.exit(entry(argv))`): returns (exit status, stdout,
    stderr, problems). An exception other than SystemExit is a traceback the user would have seen."""
    problems = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning the user would see, each time ...
        for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=quiet)  # ... but not those Python's default filters hide
        try: rc = main(argv)
        except SystemExit as e: rc = e.code
        except Exception as e:  # what the wrapper would print as a traceback
            rc = 1
            first = (str(e).strip().splitlines() or [""])[0][:200]
            problems.append(f"traceback reached the user: {type(e).__name__}: {first}")
    out, err = capfd.readouterr()
    # warnings print on stderr as `file:line: Category: message` and the source line below it
    err = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught) + err
    if rc is None: rc = 0
    elif isinstance(rc, str): err += rc + "\n"; rc = 1  # sys.exit("message"): printed on stderr, status 1
    elif not isinstance(rc, int):  # sys.exit(a dict): printed on stderr, status 1
        err += f"{rc!r}\n"; problems.append(f"the entry returned a {type(rc).__name__}, which sys.exit prints"); rc = 1
    return rc, out, err, problems


@pytest.fixture
def cli(capfd, monkeypatch):
    """Run a console script's entry function (`annotated_transformer.commands.cli.*_main`) in this process, as the installed command would
    with these arguments: `cli(main, *args, stdin=None)` -> an object with `returncode`, `stdout`, `stderr` (like
    `subprocess.run`); an exception escaping the entry function (a traceback the user would see) fails the test. Quicker than a
    fresh interpreter (no second torch import); a few tests per script still run the real command in a subprocess."""
    def run(main, *args, stdin: str | bytes | None = None):
        capfd.readouterr()
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else stdin
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        rc, out, err, problems = run_entry(main, [str(a) for a in args], capfd)
        assert not problems, problems
        return types.SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return run

@pytest.fixture(scope="session")
def chromium():
    "One headless Chromium for the whole session (Playwright's sync API allows one at a time in a process); skips when missing."
    import importlib.util, shutil
    if importlib.util.find_spec("playwright") is None: pytest.skip('playwright (Python) is not installed; pip install -e ".[dev]"')
    exe = next((p for p in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser") if p and os.path.exists(p)),
               None) or shutil.which("chromium") or shutil.which("chromium-browser")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:  # Debian's Chromium, else Playwright's own build (`python -m playwright install chromium`)
        try: b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        except Exception as e:
            if exe: raise
            pytest.skip(f"Chromium not found (apt-get install chromium, python -m playwright install chromium, or set "
                        f"CHROMIUM=/path/to/chromium): {str(e).splitlines()[0]}")
        yield b
        b.close()


# ---------------------------------------------------------------- the built docs site, served on 127.0.0.1
DOCS = pathlib.Path(__file__).resolve().parent.parent/'docs'


@pytest.fixture(scope='session')
def built_docs() -> pathlib.Path:
    import importlib.util, subprocess
    for mod in ('sphinx', 'myst_nb', 'sphinx_book_theme'):
        if importlib.util.find_spec(mod) is None: pytest.skip(f'docs toolchain missing ({mod}); install the dev extra: pip install -e ".[dev]"')
    if os.environ.get('AT_DOCS_NO_BUILD'):
        if not (DOCS/'index.html').exists(): pytest.skip('docs/ is not built and AT_DOCS_NO_BUILD is set')
        return DOCS
    r = subprocess.run([sys.executable, 'tools/build_docs.py', '-q'], cwd=DOCS.parent, capture_output=True, text=True)
    assert r.returncode == 0, f'docs build failed (warnings are errors):\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}'
    return DOCS


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


@pytest.fixture(scope='session')
def server(built_docs):
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(_Quiet, directory=str(built_docs)))
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    yield f'http://127.0.0.1:{srv.server_address[1]}/'
    srv.shutdown(); srv.server_close()


