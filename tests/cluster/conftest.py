"""The local 3-node OpenSearch cluster (scripts/opensearch-cluster.sh) for the tests of this
folder: started once per run if it is not up, and stopped at the end only if this run started
it. Every test that uses it is in one pytest-xdist group, so one worker drives it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.opensearch_cluster import OpenSearchCluster

CLUSTER_GROUP = pytest.mark.xdist_group("opensearch_cluster")


@pytest.fixture(scope="session")
def opensearch_cluster() -> Iterator[OpenSearchCluster]:
    cluster = OpenSearchCluster()
    cluster.start()
    yield cluster
    cluster.stop()
