"""Fixtures of the model tests: the provisioned embedding model, loaded in-process."""

from __future__ import annotations

import pytest

from tests import services


@pytest.fixture(scope="session")
def model_path() -> str:
    try:
        return services.embedding_model()
    except RuntimeError as exc:
        pytest.skip(str(exc))
