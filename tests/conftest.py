import os, pathlib, pytest, torch

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("AT_DATA_DIR", REPO.parent / "shared" / "data"))

def pytest_configure(config):
    for name, why in [("slow", "long-running (nbdev flag `slow`)"), ("cuda", "needs a CUDA GPU (nbdev flag `cuda`)"),
                      ("multigpu", "needs several GPUs (nbdev flag `multigpu`)")]:
        config.addinivalue_line("markers", f"{name}: {why}")

def pytest_collection_modifyitems(config, items):
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="no CUDA device"))
        if "multigpu" in item.keywords and torch.cuda.device_count() < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 or more CUDA devices"))

@pytest.fixture
def shared_data():
    "Path of ../shared/data (or $AT_DATA_DIR); skips the test when it is absent."
    if not SHARED_DATA.is_dir(): pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
