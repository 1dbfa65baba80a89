"""The report's plot data and timeline: what the checks' one pass counts for the plots is what counting the evidence
rows gives, and the timeline draws a band for every bin with nacks or expiries and every network fault applied."""

from __future__ import annotations

import random

import pytest

from support import histories as H
from pubsubguard.validation.evidence.records import DeclaredSubscription, RunInfo
from support.reports import ORDERED, PLAIN


@pytest.mark.parametrize("timeline_bins", [300, 5])
def test_plot_data_comes_from_the_pass_and_counts_every_row(spark, monkeypatch, timeline_bins):
    """The report's timeline, extent, crash window, expiry deadlines and latency CDF (and the poison
    publishes the verdict needs) come from the checks' one pass (checks.CheckResults.plot), chunk by chunk; merged, they are what counting the
    evidence rows directly gives (few bins: every chunk's bins coarsened to the run's)."""
    from pubsubguard.validation.checks import aggregates
    from pubsubguard.validation.checks.run import run_checks

    monkeypatch.setattr(aggregates, "TIMELINE_BINS", timeline_bins)
    subs = [PLAIN, ORDERED, DeclaredSubscription("eod", "t2", exactly_once=True, ack_deadline_s=60),
            DeclaredSubscription("dl", "t3", max_delivery_attempts=5, dead_letter_topic="t-dlq")]
    h = H.generate(subs, H.Workload(keys=4, messages_per_key=9, poison_rate=0.2, fault_rate=0.5), seed=3)
    h, _ = H.mutate_lost(h, random.Random(2))
    results = run_checks(spark.createDataFrame(h.publish_table()), spark.createDataFrame(h.delivery_table()), subs,
                         chunk_rows=16)
    plot = results.plot
    # and what the verdict needs of the publishes beside the statistics: the poison published per subscription
    poison = {s.name: sum(p["poison"] and p["status"] == "ok" and p["topic"] == s.topic for p in h.publishes) for s in subs}
    assert results.poison_published == poison and poison["dl"] > 0
    assert {"delivered:expire", "delivered:crash", "delivered:late_ack", "delivered:nack"} <= set(plot["timeline"])

    topics = {}
    for s in subs:
        topics[s.topic] = topics.get(s.topic, 0) + 1
    ok = [p for p in h.publishes if p["status"] == "ok"]
    mine = [d for d in h.deliveries if d["probe_run"] == h.run_id]
    deliveries = [d for d in mine if d["kind"] == "delivery"]
    t0 = min(p["publish_time_us"] for p in ok)
    t1 = max(max(d["receive_time_us"], d["ack_time_us"] or 0) for d in mine)
    bin_us = plot["bin_us"]
    assert plot["t0"] <= t0 < plot["t0"] + bin_us and bin_us & (bin_us - 1) == 0
    assert plot["bins"] == (t1 - plot["t0"]) // bin_us + 1 <= max(timeline_bins, 1)
    assert plot["bins"] * 2 >= timeline_bins or bin_us == 1 << aggregates.TIMELINE_MIN_SHIFT  # else a finer bin fits

    def binned(times):
        counts = {}
        for t, n in times:
            b = (t - plot["t0"]) // bin_us
            counts[b] = counts.get(b, 0) + n
        return counts

    settled = {}
    for d in mine:
        if d["kind"] == "dead_letter" or (d["action"] in ("ack", "late_ack") and d["ack_result"] == "success"):
            at = d["receive_time_us"] if d["kind"] == "dead_letter" else d["ack_time_us"]
            m = (d["subscription"], d["key"], d["seq"])
            settled[m] = min(settled.get(m, at), at)
    expected = {"published": binned((p["publish_time_us"], topics[p["topic"]]) for p in ok),
                "settled": binned((t, 1) for t in settled.values())}
    for action in {d["action"] for d in deliveries}:
        expected[f"delivered:{action}"] = binned((d["receive_time_us"], 1) for d in deliveries if d["action"] == action)
    assert plot["timeline"] == expected
    crash = [d["receive_time_us"] for d in deliveries if d["action"] == "crash"]
    assert plot["crash"] == (min(crash), max(crash))
    held = {}
    for d in deliveries:
        if d["action"] in ("expire", "late_ack"):
            held[d["subscription"]] = max(held.get(d["subscription"], 0), d["ack_deadline_s"])
    assert plot["expiry_deadline_s"] == held
    assert plot["first_publish_us"] == min(p["publish_time_us"] for p in h.publishes)
    # the latency CDF: every message published ok and delivered, once
    first = {}
    for d in deliveries:
        m = (d["subscription"], d["key"], d["seq"])
        first[m] = min(first.get(m, d["receive_time_us"]), d["receive_time_us"])
    for s in subs:
        published = {(p["key"], p["seq"]): p["publish_time_us"] for p in ok if p["topic"] == s.topic}
        ms = sorted((t - published[(k, q)]) / 1000 for (name, k, q), t in first.items()
                    if name == s.name and (k, q) in published)
        assert plot["latency"][s.name] == {"ms": ms, "fraction": [(i + 1) / len(ms) for i in range(len(ms))],
                                           "messages": len(ms)}


def test_the_timeline_draws_a_band_for_every_bin_with_nacks_or_expiries():
    """Each bin with nacks gets an orange band as wide as the bin, darker with more nacks; each bin with
    expiries a purple one as long as the longest deadline; the x axis spans them all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    from pubsubguard.validation.report.plots import _timeline_plot

    data = {"bins": 10, "bin_us": 1_000_000, "t0": 0, "start": 0, "crash": None, "expiry_deadline_s": {"s": 30},
            "timeline": {"published": {0: 5}, "settled": {1: 5}, "delivered:ack": {1: 3},
                         "delivered:nack": {2: 1, 5: 9}, "delivered:expire": {7: 1}}}
    fig = _timeline_plot(data, plt)
    for ax in fig.axes:
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 2
        nacks, expiries = bands
        assert [tuple(p.vertices[:, 0].round(6)) for p in nacks.get_paths()] == [(2, 2, 3, 3, 2), (5, 5, 6, 6, 5)]
        assert np.allclose(nacks.get_facecolors(), [to_rgba("tab:orange", 0.15), to_rgba("tab:orange", 0.5)])
        assert [tuple(p.vertices[:, 0].round(6)) for p in expiries.get_paths()] == [(7, 7, 37, 37, 7)]
        assert ax.get_xlim()[1] >= 37  # the expiry band's end is in view
    plt.close(fig)


def test_the_timeline_draws_a_band_for_every_network_fault_applied():
    """The fault layer's network faults (`--nemesis`, document.network_bands): stream kills, lost and delayed
    replies as a band per bin they fell in (darker with more), a partition or a netem window from its start to
    its end; each
    kind in its colour, on both axes, after the nack and expiry bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    from pubsubguard.validation.report.plots import NETWORK_BANDS, _timeline_plot

    S = 1_000_000
    data = {"bins": 10, "bin_us": S, "t0": 0, "start": 0, "crash": None, "expiry_deadline_s": {},
            "timeline": {"published": {0: 5}, "settled": {1: 5}, "delivered:ack": {1: 3}},
            "network": {"kill_stream": [[2.5 * S, 2.5 * S], [2.6 * S, 2.6 * S], [7.2 * S, 7.2 * S]],
                        "partition": [[3 * S, 8.5 * S]], "lose_response": [[4.2 * S, 4.2 * S]],
                        "delay": [[1.1 * S, 1.1 * S]], "netem": [[5.5 * S, 6.25 * S]]}}
    fig = _timeline_plot(data, plt)
    for ax in fig.axes:
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 5  # no nacks or expiries: the five network kinds, in NETWORK_BANDS' order
        kills, lost, delayed, partitions, packets = bands
        xs = lambda c: [tuple(p.vertices[:, 0].round(6)) for p in c.get_paths()]  # noqa: E731
        assert xs(kills) == [(2, 2, 3, 3, 2), (7, 7, 8, 8, 7)]
        assert np.allclose(kills.get_facecolors(), [to_rgba(NETWORK_BANDS["kill_stream"][0], 0.2),
                                                    to_rgba(NETWORK_BANDS["kill_stream"][0], 0.15)])
        assert xs(lost) == [(4, 4, 5, 5, 4)] and xs(delayed) == [(1, 1, 2, 2, 1)]
        assert xs(partitions) == [(3, 3, 8.5, 8.5, 3)]
        assert np.allclose(partitions.get_facecolors(), [to_rgba(NETWORK_BANDS["partition"][0], 0.2)])
        assert xs(packets) == [(5.5, 5.5, 6.25, 6.25, 5.5)]  # a netem window from its start to its end
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [label for label in labels if label.startswith("network:")] == [
        f"network: {label}" for _, label in NETWORK_BANDS.values()]
    plt.close(fig)


def test_network_bands_are_the_applied_network_faults_of_run_json():
    """document.network_bands: one span per applied network fault (instants; a partition for its for_s), no
    planted anomaly, no fault that was not applied, no refused call of a partition."""
    from pubsubguard.validation.report.document import network_bands
    from pubsubguard.validation.evidence.records import RunInfo

    def row(entry, kind, t, detail="x", planted=False):
        return {"entry": entry, "kind": kind, "time_us": t, "detail": detail, "planted": planted}

    info = RunInfo("r", "emulator", [], parameters={"nemesis": {
        "faults": [{"index": 0, "kind": "partition", "for_s": 2.5}, {"index": 1, "kind": "kill_stream"},
                   {"index": 2, "kind": "ack_lie"}, {"index": 3, "kind": "lose_response"}],
        "applied": [row(0, "partition", 10, "cut off for 2.5s"), row(0, "partition", 11, "refused during the partition"),
                    row(1, "kill_stream", 20), row(1, "kill_stream", 21, "NOT applied: no stream"),
                    row(2, "ack_lie", 30, planted=True), row(3, "lose_response", 40)]}})
    assert network_bands(info) == {"partition": [[10, 2_500_010]], "kill_stream": [[20, 20]], "lose_response": [[40, 40]]}
    assert network_bands(RunInfo("r", "emulator", [])) == {}
