"""An API instance with a cross-encoder: a small one built here, untrained."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.conftest import ApiProcess


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CrossEncoder on the packaged all-MiniLM-L6-v2 backbone with a fresh, *untrained*
    classification head: its scores are arbitrary, which is enough to test the stage's
    mechanics (it re-orders by whatever the model says), not its quality."""
    from sentence_transformers import CrossEncoder

    backbone = Path(services.CACHE_DIR) / "models" / "all-MiniLM-L6-v2"
    if not (backbone / "config.json").exists():
        pytest.fail(f"{backbone} missing: run scripts/install-models.sh")
    target = tmp_path_factory.mktemp("tiny-cross-encoder")
    CrossEncoder(str(backbone), num_labels=1).save(str(target))
    return target


@pytest.fixture(scope="session")
def api_with_cross_encoder(
    migrated: dict[str, str], tiny_cross_encoder: Path
) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_CROSS_ENCODER_MODEL": str(tiny_cross_encoder),
        "COGNIS_RELAY_IN_API": "false",
        "COGNIS_RERANK_TOP_N": "5",
    }
    process = ApiProcess(env, "api-cross-encoder")
    process.wait_ready()
    yield process
    process.stop()
