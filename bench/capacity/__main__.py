"""``make capacity``: print the model, and write its tables into docs/scale.md and its chart into
docs/scale.png."""

from __future__ import annotations

import time
from pathlib import Path

from bench.capacity.mixes import run
from bench.capacity.model import MixFigures

DOC = Path(__file__).parents[2] / "docs" / "scale.md"
CHART = DOC.with_suffix(".png")
BEGIN, END = "<!-- make capacity: begin -->", "<!-- make capacity: end -->"


def draw(figures: list[MixFigures], path: Path = CHART) -> None:
    """A bar per ceiling and mix: the traffic at which it is reached, against the mix's goal."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file only
    from matplotlib import pyplot

    colours = {"design": "#c0392b", "template": "#e67e22", "account": "#2e86c1"}
    fig, axes = pyplot.subplots(len(figures), 1, figsize=(11, 4.3 * len(figures)))
    for axis, f in zip(axes, figures, strict=True):
        shown = f.ceilings[:10]
        axis.barh(
            [c.resource for c in shown], [c.at_rps for c in shown], color=[colours[c.kind] for c in shown]
        )
        axis.axvline(f.goal_rps, color="black", linestyle="--", label=f"goal {f.goal_rps:,.0f} req/s")
        axis.set_xscale("log")
        axis.invert_yaxis()
        axis.set_title(f.title, fontsize=10)
        axis.set_xlabel(
            "requests/s of this mix at which each limit is reached\n"
            "(red: our design; orange: a template parameter; blue: an AWS quota or setting)"
        )
        axis.legend(loc="lower right")
        axis.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    pyplot.close(fig)


def write_doc(table: str, path: Path = DOC) -> None:
    """Put ``table`` between the markers of docs/scale.md."""
    text = path.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    path.write_text(f"{head}{BEGIN}\n```text\n{table}\n```\n{END}{tail}")


def main() -> None:
    """``make capacity``: print the model, and write its tables and chart into docs/."""
    from nimbus_tools.template import load_template

    started = time.perf_counter()
    report = run(load_template(), 1)
    print(report.table)
    write_doc(report.table)
    figures, _ = report.data
    draw(figures)
    print(f"\nwrote {DOC.name} and {CHART.name} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
