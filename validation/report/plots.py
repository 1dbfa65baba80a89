"""The report's plots, drawn with matplotlib from the document's `_plots` data (report.html embeds them as PNG):
the run's timeline with the faults as bands, the latency CDF per subscription, and each plotted key's sequence
of deliveries. Drawing only: the data comes aggregated from the checks' pass and read by the job."""

from __future__ import annotations

import base64
import io

from ..checks.wording import clock


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


LEGEND_OUTSIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
ACTION_COLOURS = {"ack": "tab:green", "nack": "tab:orange", "late_ack": "tab:red", "expire": "tab:purple",
                  "crash": "black", "none": "tab:blue"}


# the network faults of the fault layer (`--nemesis`) on the timeline, in this order
NETWORK_BANDS = {"kill_stream": ("tab:red", "stream kills"), "lose_response": ("tab:brown", "lost replies"),
                 "delay": ("tab:olive", "delayed calls"), "partition": ("tab:cyan", "partitions (cut off)"),
                 "netem": ("tab:pink", "packet faults (netem)")}


def _bands(ax, starts, ends, colour: str, alphas) -> None:
    """Full-height bands from `starts` to `ends` (data x), as `axvspan` draws each, in one collection:
    a run's timeline can have hundreds (one per bin with nacks or expiries), which as single patches
    took most of the report's render time."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    if not len(starts):
        return
    boxes = [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for a, b in zip(starts, ends)]
    colours = [to_rgba(colour, alpha) for alpha in alphas]
    ax.add_collection(PolyCollection(boxes, facecolors=colours, linewidths=0, transform=ax.get_xaxis_transform()),
                      autolim=False)
    ax.update_datalim(np.column_stack([np.concatenate([starts, ends]), np.zeros(2 * len(starts))]), updatey=False)


def _timeline_plot(data: dict, plt):
    """Throughput (published, delivered, settled per second) and outstanding messages over the run,
    with the faults as bands: nacks (orange), expiries held to their deadline (purple), the crash (grey),
    and the network faults the fault layer applied (`data["network"]`, NETWORK_BANDS): a band per bin
    with stream kills, lost or delayed replies (darker with more), a partition from its start to its end."""
    import numpy as np

    bins, bin_s = int(data["bins"]), data["bin_us"] / 1e6
    x = np.arange(bins) * bin_s + (data["t0"] - data["start"]) / 1e6  # seconds since the run's start

    def series(name):
        out = np.zeros(bins)
        for b, n in data["timeline"].get(name, {}).items():
            if 0 <= b < bins:
                out[b] += n
        return out

    published, settled = series("published"), series("settled")
    delivered = sum((series(n) for n in data["timeline"] if n.startswith("delivered:")), np.zeros(bins))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    top.plot(x, published / bin_s, label="published (per subscription)", color="tab:blue")
    top.plot(x, delivered / bin_s, label="delivered", color="tab:gray")
    top.plot(x, settled / bin_s, label="settled", color="tab:green")
    top.set_ylabel("messages / s")
    top.set_title("Throughput and outstanding messages, with the injected faults")
    bottom.plot(x, np.cumsum(published) - np.cumsum(settled), color="tab:red", label="outstanding (published − settled)")
    bottom.set_ylabel("messages")
    bottom.set_xlabel(f"seconds since the run's start ({clock(data['start'])})")
    nacks, expiries = series("delivered:nack"), series("delivered:expire") + series("delivered:late_ack")
    deadline = max(data["expiry_deadline_s"].values(), default=0)
    nacked, expired = np.flatnonzero(nacks), np.flatnonzero(expiries)
    for ax in (top, bottom):
        _bands(ax, x[nacked], x[nacked] + bin_s, "tab:orange", np.minimum(0.5, 0.1 + 0.05 * nacks[nacked]))
        _bands(ax, x[expired], x[expired] + deadline, "tab:purple", np.full(len(expired), 0.08))
        if data["crash"]:
            first, last = ((t - data["start"]) / 1e6 for t in data["crash"])
            ax.axvspan(first, last + bin_s, color="black", alpha=0.25, lw=0)
    network = data.get("network") or {}
    _network_bands((top, bottom), network, data["start"], x[0], bin_s)
    from matplotlib.patches import Patch

    handles = top.get_legend_handles_labels()[0] + [Patch(color="tab:orange", alpha=0.4, label="nacks"),
                                                    Patch(color="tab:purple", alpha=0.2, label="expiries (held to the deadline)"),
                                                    Patch(color="black", alpha=0.25, label="crash (deliveries held by the dying task)")]
    handles += [Patch(color=colour, alpha=0.3, label=f"network: {label}")
                for kind, (colour, label) in NETWORK_BANDS.items() if network.get(kind)]
    top.legend(handles=handles, **LEGEND_OUTSIDE)  # beside the axes, never over the data
    bottom.legend(**LEGEND_OUTSIDE)
    return fig


def _network_bands(axes, network: dict, start_us: int, x0: float, bin_s: float) -> None:
    """The network faults the fault layer applied (`network`: kind -> [start_us, end_us] per fault, NETWORK_BANDS'
    order) as bands on each of `axes`: a partition or packet fault from its start to its end; stream kills, lost or
    delayed replies one band per bin of the timeline (from `x0`, `bin_s` wide), darker with more faults in it."""
    import numpy as np

    for kind, (colour, _) in NETWORK_BANDS.items():
        if not network.get(kind):
            continue
        spans = (np.asarray(network[kind], np.float64) - start_us) / 1e6
        if kind in ("partition", "netem"):  # windows
            starts, ends, alphas = spans[:, 0], spans[:, 1], np.full(len(spans), 0.2)
        else:  # instants: one band per bin of the timeline, darker with more faults in it
            bins_of, counts = np.unique(np.floor((spans[:, 0] - x0) / bin_s).astype(np.int64), return_counts=True)
            starts = x0 + bins_of * bin_s
            ends, alphas = starts + bin_s, np.minimum(0.5, 0.1 + 0.05 * counts)
        for ax in axes:
            _bands(ax, starts, ends, colour, alphas)


def _latency_plot(data: dict, plt):
    import numpy as np

    fig, ax = plt.subplots(figsize=(10, 4))
    summarised = False
    for name in sorted(data["latency"]):
        cdf = data["latency"][name]
        values = np.maximum(np.asarray(cdf["ms"]), 1e-3)  # a log axis: clamp at 1 µs
        ax.step(values, cdf["fraction"], where="post", label=f"{name} ({cdf['messages']})")
        summarised |= len(values) < cdf["messages"]
    ax.set_xscale("log")
    ax.set_xlabel("publish → first receive (ms, log scale)")
    ax.set_ylabel("fraction of messages")
    for q in (0.5, 0.95, 0.99):
        ax.axhline(q, color="#bbb", lw=0.7, ls=":")
    ax.set_title("Latency CDF per subscription" + (" (steps evenly spaced in rank)" if summarised else ""))
    ax.legend(**LEGEND_OUTSIDE)
    return fig


def _sequence_plot(title: str, rows: list[dict], violations: list[dict], start_us: int, plt):
    fig, ax = plt.subplots(figsize=(10, 3))
    t0 = start_us
    for action, colour in ACTION_COLOURS.items():
        pts = [r for r in rows if r["action"] == action and r["seq"] is not None]
        if pts:
            ax.scatter([(r["receive_time_us"] - t0) / 1e6 for r in pts], [r["seq"] for r in pts], s=14, color=colour, label=action)
    if violations:
        ax.scatter([(v["t"] - t0) / 1e6 for v in violations], [v["seq"] for v in violations], s=90, marker="x",
                   color="red", linewidths=2, label="violating delivery")
        examples = [v for v in violations if v.get("example")]
        if examples:
            ax.scatter([(v["t"] - t0) / 1e6 for v in examples], [v["seq"] for v in examples], s=260, marker="o",
                       facecolors="none", edgecolors="black", linewidths=1.2, label="the worked example")
    ax.set_xlabel(f"seconds since the run's start ({clock(start_us)})")
    ax.set_ylabel("seq")
    ax.set_title(f"Deliveries of {title} (seq over time, by what the subscriber did)")
    ax.legend(**LEGEND_OUTSIDE)
    return fig


def plots(result: dict) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The run's plots (timeline, latency CDF) and the sequence plot per key ("subscription / key")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = result["_plots"]
    if data.get("timeline") is None:
        return [], {}
    images = [("Timeline", _png(_timeline_plot(data, plt)))]
    if data["latency"]:
        images.append(("Latency CDF per subscription", _png(_latency_plot(data, plt))))
    keys = {title: _png(_sequence_plot(title, rows, data["violations"].get(title, []), data["start"], plt))
            for title, rows in sorted(data["timelines"].items())}
    return images, keys
