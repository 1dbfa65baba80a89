"""The watch's rolling report: report.json and report.html rewritten after every window, from what the sink
holds of the last windows (`sink.WINDOWS_KEPT`) and findings, with the horizons, the time since the last
breakage, a timeline of the windows and the footprint sampled once a minute. It renders what the windows said;
it judges nothing."""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

from ..checks.wording import sentence


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


class RollingReport:
    def __init__(self, out: Path, stack: str, run_id: str, horizons: dict, delay_s: float, footprints,
                 conformance=lambda: None):
        self.out, self.stack, self.run_id, self.horizons, self.delay_s = out, stack, run_id, horizons, delay_s
        self.footprints = footprints
        self.conformance = conformance  # () -> WatchConformance.summary(), None when the scenarios do not run

    def document(self, sink, final: bool = False) -> dict:
        with sink.lock:
            windows = list(sink.recent)
            findings = list(sink.recent_findings)
            totals = sink.totals
        last = totals.last_breakage
        return {
            "stack": self.stack, "run_id": self.run_id, "final": final, "written_at": time.time(),
            "horizons_s": self.horizons, "watermark_delay_s": self.delay_s,
            "windows_judged": totals.windows, "error_findings": totals.errors, "broken": sorted(totals.broken),
            "last_breakage": last, "since_last_breakage_s": None if last is None else round(time.time() - last, 1),
            "windows": [{k: v for k, v in w.items() if k != "end_ts"} for w in windows],
            "findings": findings[-200:], "footprint": self.footprints.samples, "conformance": self.conformance(),
        }

    def write(self, sink, final: bool = False) -> None:
        doc = self.document(sink, final)
        _write(self.out / "report.json", json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
        _write(self.out / "report.html", render(doc))


def _timeline(windows: list[dict]) -> str:
    """An SVG: each window a bar of its deliveries, red where it found an error."""
    if not windows:
        return "<p>No window judged yet.</p>"
    width, height = 720, 120
    most = max(1, max(sum(s["delivered"] for s in w["subscriptions"].values()) for w in windows))
    step = width / len(windows)
    bars = []
    for i, w in enumerate(windows):
        delivered = sum(s["delivered"] for s in w["subscriptions"].values())
        broke = any(v == "violated" for s in w["subscriptions"].values() for v in s["guarantees"].values())
        h = max(1.0, (height - 20) * delivered / most)
        bars.append(f'<rect x="{i * step:.1f}" y="{height - h:.1f}" width="{max(1.0, step - 1):.1f}" height="{h:.1f}" '
                    f'fill="{"#c62828" if broke else "#4caf50"}"><title>window {w["window"]} {html.escape(w["end"])}: '
                    f'{delivered} deliveries</title></rect>')
    return f'<svg width="{width}" height="{height}" role="img" aria-label="deliveries per window">{"".join(bars)}</svg>'


def _why(finding: dict) -> str:
    if finding["planted"]:
        return f"planted by {finding.get('planted_by', '')}"
    if finding.get("explained_by"):
        return f"explained by {', '.join(finding['explained_by'])} (violated on this target)"
    return "unexplained"


def _conformance(summary: dict | None) -> str:
    if summary is None:
        return "<p>Not run (--conform-every 0): findings are not explained by scenario.</p>"
    if not summary["runs"]:
        failed = f" (the last failed: {summary['error']})" if summary["error"] else ""
        return f"<p>No run has ended yet{html.escape(failed)}.</p>"
    last = summary["runs"][-1]
    violated = sorted(i for i, r in summary["results"].items() if r == "violated")
    return (f"<p>{len(summary['runs'])} runs; the last, {html.escape(last['run_id'])} at {html.escape(last['started'])}: "
            f"{html.escape(', '.join(f'{n} {r}' for r, n in last['summary'].items()))}. Violated: "
            f"{html.escape(', '.join(violated) or 'none')} (conformance.json). Not beside a watch: "
            f"{html.escape(', '.join(summary['left_out']) or 'none')}.</p>")


def render(doc: dict) -> str:
    since = doc["since_last_breakage_s"]
    state = ("no breakage in this run" if since is None else
             f"last breakage {since:,.0f} s ago ({', '.join(doc['broken'])})")
    rows = []
    for f in reversed(doc["findings"][-100:]):
        try:
            said = sentence(f, lambda name: str(f.get(name, "?")))
        except (KeyError, ValueError, TypeError):
            said = ""
        rows.append(f"<tr><td>{html.escape(f['decided_at'])}</td><td>{html.escape(f['subscription'])}</td>"
                    f"<td>{html.escape(f['kind'])} {html.escape(f['form'] or '')}</td><td>{html.escape(f['severity'])}</td>"
                    f"<td>{html.escape(str(f['key']))}/{f['seq']}</td><td>{html.escape(_why(f))}</td>"
                    f"<td>{html.escape(said)}</td></tr>")
    windows = "".join(f"<li>{html.escape(w['line'])}</li>" for w in reversed(doc["windows"][-20:]))
    horizons = ", ".join(f"{html.escape(n)}: {h:g} s" for n, h in doc["horizons_s"].items())
    foot = doc["footprint"][-1] if doc["footprint"] else {}
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>pubsubguard watch: {html.escape(doc['stack'])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}td,th{{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}}</style></head><body>
<h1>pubsubguard watch: stack {html.escape(doc['stack'])}</h1>
<p><strong>{html.escape(state)}</strong>; {doc['windows_judged']} windows judged, {doc['error_findings']} error findings
{'(stopped)' if doc['final'] else '(running)'}.</p>
<p>Delivery horizons: {horizons}; the watermark trails the newest row by {doc['watermark_delay_s']:g} s.</p>
<h2>Timeline (deliveries per window; red: a guarantee broke)</h2>{_timeline(doc['windows'])}
<h2>Last windows</h2><ul>{windows}</ul>
<h2>Findings (newest first)</h2><table><tr><th>decided</th><th>subscription</th><th>kind</th><th>severity</th><th>key/seq</th><th>why</th><th>what</th></tr>{''.join(rows)}</table>
<h2>Conformance scenarios</h2>{_conformance(doc['conformance'])}
<h2>Footprint</h2><p>{html.escape(json.dumps(foot))} ({len(doc['footprint'])} samples, one a minute, in report.json)</p>
</body></html>
"""
