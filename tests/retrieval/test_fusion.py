"""Weighted RRF arithmetic: RRF_r(d) = 1 / (k + rank_r(d)), score = sum of weight_r * RRF_r."""

import pytest

from app.retrieval.fusion import RankedList, fuse_rrf


def test_scores_follow_the_formula_with_k_10_and_70_30_weights() -> None:
    fused = fuse_rrf(
        [RankedList("vector", ["a", "b", "c"], 0.7), RankedList("bm25", ["c", "a"], 0.3)], k=10
    )
    by_id = {f.id: f for f in fused}
    assert by_id["a"].score == pytest.approx(0.7 / 11 + 0.3 / 12)
    assert by_id["b"].score == pytest.approx(0.7 / 12)
    assert by_id["c"].score == pytest.approx(0.7 / 13 + 0.3 / 11)
    assert [f.id for f in fused] == ["a", "c", "b"]
    assert by_id["c"].ranks == {"vector": 3, "bm25": 1}
    assert by_id["b"].ranks == {"vector": 2}


def test_bm25_only_document_can_outrank_a_low_vector_hit() -> None:
    vector = [f"v{i}" for i in range(20)]
    fused = fuse_rrf([RankedList("vector", vector, 0.7), RankedList("bm25", ["rare"], 0.3)], k=10)
    ids = [f.id for f in fused]
    # 0.3/11 = 0.0273 beats vector rank 16 (0.7/26 = 0.0269) but not rank 15 (0.7/25 = 0.028).
    assert ids.index("rare") == 15


def test_weights_decide_between_lists() -> None:
    lists = [RankedList("vector", ["x"], 0.5), RankedList("bm25", ["y"], 0.5)]
    assert [f.id for f in fuse_rrf(lists, k=60)] == ["x", "y"]  # tie keeps list order
    lists = [RankedList("vector", ["x"], 0.3), RankedList("bm25", ["y"], 0.7)]
    assert [f.id for f in fuse_rrf(lists, k=60)] == ["y", "x"]


def test_duplicate_in_one_list_counts_once_at_best_rank() -> None:
    fused = fuse_rrf([RankedList("vector", ["a", "a", "b"], 1.0)], k=10)
    by_id = {f.id: f for f in fused}
    assert by_id["a"].score == pytest.approx(1 / 11)
    assert by_id["b"].score == pytest.approx(1 / 13)


def test_negative_k_is_rejected() -> None:
    with pytest.raises(ValueError, match="k must be"):
        fuse_rrf([RankedList("vector", ["a"], 1.0)], k=-1)
