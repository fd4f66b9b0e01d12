"""`bench e2e` reads which pull route the workers used from the ingresses' /metrics:
a burst's pulls per route are the difference of two scrapes, summed over ingresses."""

from __future__ import annotations

from tools.bench.e2e import Scrape


def _metrics(single: int, batch: int, other: int) -> str:
    return "\n".join([
        "# TYPE qinglong_ingress_request_duration_seconds histogram",
        f'qinglong_ingress_request_duration_seconds_count{{route="/v1/offers/pull"}} {single}',
        f'qinglong_ingress_request_duration_seconds_count{{route="/v1/offers/pull-batch"}} {batch}',
        f'qinglong_ingress_request_duration_seconds_count{{route="/v1/sessions"}} {other}',
        'qinglong_ingress_request_duration_seconds_bucket'
        f'{{route="/v1/offers/pull-batch",le="+Inf"}} {batch}',
    ])  # fmt: skip


def test_pulls_by_route_of_a_burst() -> None:
    before, after = Scrape(), Scrape()
    for text in (_metrics(3, 10, 2), _metrics(1, 5, 2)):  # two ingresses
        before.add(text)
    for text in (_metrics(4, 90, 7), _metrics(1, 45, 3)):
        after.add(text)
    burst = after.minus(before)
    assert burst.pulls_by_route == {"/v1/offers/pull": 1.0, "/v1/offers/pull-batch": 120.0}
    assert burst.pulls == 120.0  # the duration histogram's +Inf bucket: every pull
