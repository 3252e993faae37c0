"""The URL filter's address table, without services: what is refused (and why), what a
globally reachable receiver (also behind NAT64 or 6to4 of a public address) may use."""

from __future__ import annotations

import pytest

from app.webhooks.urls import WebhookUrlRefused, check_url, refusal


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("100.100.100.200", "non-global"),  # a cloud's instance metadata
        ("100.64.0.1", "non-global"),  # carrier-grade NAT
        ("192.0.0.192", "non-global"),
        ("198.18.0.1", "private"),  # benchmarking
        ("fec0::1", "non-global"),  # site-local
        ("::7f00:1", "non-global"),  # IPv4-compatible 127.0.0.1
        ("2002:7f00:1::", "loopback (it carries 127.0.0.1)"),  # 6to4
        ("64:ff9b::a9fe:a9fe", "private (it carries 169.254.169.254)"),  # NAT64
        ("::ffff:10.0.0.1", "private"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("127.0.0.1", "loopback"),
        ("fe80::1%eth0", "private"),
    ],
)
def test_non_global_addresses_are_refused_with_a_reason(address: str, why: str) -> None:
    assert refusal(address) == why


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::"]
)
def test_globally_reachable_addresses_pass(address: str) -> None:
    assert refusal(address) is None


@pytest.mark.parametrize(
    "url", ["http://[2002:7f00:1::]/", "https://100.100.100.200/latest/meta-data/"]
)
async def test_literal_addresses_are_refused_without_a_dns_lookup(url: str) -> None:
    with pytest.raises(WebhookUrlRefused, match="COGNIS_WEBHOOK_ALLOW_PRIVATE"):
        await check_url(url, allow_private=False)
