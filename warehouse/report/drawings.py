"""How each chart of the report is drawn: an altair (Vega-Lite) chart over the rows it is given.

Most charts are bars of one count stacked by a category (`stacked_bars`): one column per day,
or one horizontal bar per name (queues, campaigns). Every chart carries its rows inline, so the
page needs no data but its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt

from warehouse.report.data import Drawing, Row

DAY = alt.X("date:O", title="day (UTC)", axis=alt.Axis(labelAngle=-45))


def _data(rows: list[Row]) -> Drawing:
    """The rows inline in the spec: the report carries its own data."""
    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


def _tip(name: str, title: str, fmt: str | None = None) -> alt.Tooltip:
    return alt.Tooltip(name, title=title, format=fmt) if fmt else alt.Tooltip(name, title=title)


def _tips(*fields: tuple[str, str] | tuple[str, str, str]) -> list[alt.Tooltip]:
    """Tooltips from `(field, title)` or `(field, title, number format)`."""
    return [_tip(*f) for f in fields]


def _split(name: str, title: str, colors: Mapping[str, str] | None = None) -> alt.Color:
    """The color of the stacked category; `colors` fixes each value's color, in legend order."""
    if colors is None:
        return alt.Color(name, title=title)
    scale = alt.Scale(domain=list(colors), range=list(colors.values()))
    return alt.Color(name, title=title, scale=scale)


def stacked_bars(
    rows: list[Row] | None,
    along: alt.X | alt.Y,
    measure: str,
    title: str,
    color: alt.Color,
    tooltip: list[alt.Tooltip],
    **more: Any,
) -> Drawing:
    """Bars of `measure` stacked by `color`, one per value of `along`: the days (an x axis) or
    names (a y axis, horizontal bars). Without rows, the bars take the data of the
    concatenation they are put in."""
    chart = alt.Chart() if rows is None else alt.Chart(_data(rows))
    if isinstance(along, alt.Y):
        axes = {"y": along, "x": alt.X(measure, title=title, stack="zero")}
    else:
        axes = {"x": along, "y": alt.Y(measure, title=title, stack="zero")}
    return chart.mark_bar().encode(**axes, color=color, tooltip=tooltip, **more)


def volume(rows: list[Row]) -> Drawing:
    tips = _tips(("date:O", "day"), ("type:N", "type"), ("cdrs:Q", "CDRs"))
    return stacked_bars(rows, DAY, "cdrs:Q", "CDRs (count)", _split("type:N", "CDR type"), tips)


def cost(rows: list[Row]) -> Drawing:
    tips = _tips(
        ("date:O", "day"), ("type:N", "type"), ("cost_exact:N", "cost (exact)"), ("cdrs:Q", "CDRs")
    )
    by_type = _split("type:N", "CDR type")
    return stacked_bars(rows, DAY, "cost:Q", "cost (account currency)", by_type, tips)


def sla(rows: list[Row]) -> Drawing:
    status = _split("status:N", "SLA status", {"met": "#4c9a2a", "breached": "#d1495b"})
    tips = _tips(
        ("date:O", "day"),
        ("sla:N", "SLA"),
        ("status:N", "status"),
        ("conversations:Q", "conversations"),
    )
    return stacked_bars(
        rows,
        DAY,
        "conversations:Q",
        "conversations (count)",
        status,
        tips,
        xOffset=alt.XOffset("sla:N", title="SLA"),
    )


def queues(rows: list[Row]) -> Drawing:
    outcome = _split("outcome:N", "outcome", {"answered": "#4c78a8", "unanswered": "#e45756"})
    tips = _tips(
        ("queue:N", "queue"),
        ("outcome:N", "outcome"),
        ("calls:Q", "calls"),
        ("unanswered_pct:Q", "unanswered (%)", ".2f"),
    )
    queue = alt.Y("queue:N", title="queue", sort="-x")
    calls = stacked_bars(None, queue, "calls:Q", "calls (count)", outcome, tips)
    wait = (
        alt.Chart()
        .transform_filter("datum.outcome == 'answered'")
        .mark_bar(color="#f58518")
        .encode(
            y=alt.Y("queue:N", title=None, sort=alt.EncodingSortField("calls_offered", "max")),
            x=alt.X("avg_wait_s:Q", title="average queue wait (seconds)"),
            tooltip=[_tip("queue:N", "queue"), _tip("avg_wait_s:Q", "avg wait (s)", ".1f")],
        )
        .properties(width=260)
    )
    return alt.hconcat(calls.properties(width=380), wait, data=_data(rows))


def agents(rows: list[Row]) -> Drawing:
    agent = alt.Y(
        "agent:N", title="agent", sort=alt.EncodingSortField("handled", "max", "descending")
    )
    color = alt.Color("group:N", title="agents")
    tips = _tips(
        ("agent:N", "agent"),
        ("handled:Q", "handled CDRs"),
        ("talk_h:Q", "talk (h)", ".2f"),
        ("hold_h:Q", "hold (h)", ".2f"),
    )

    def panel(field_: str, title: str, *, first: bool) -> Drawing:
        return (
            alt.Chart()
            .mark_bar()
            .encode(
                y=agent if first else agent.axis(None),
                x=alt.X(f"{field_}:Q", title=title),
                color=color,
                tooltip=tips,
            )
            .properties(width=200)
        )

    return alt.hconcat(
        panel("handled", "handled CDRs (calls + conversations)", first=True),
        panel("talk_h", "talk time (hours)", first=False),
        panel("hold_h", "hold time (hours)", first=False),
        data=_data(rows),
    )


def campaigns(rows: list[Row]) -> Drawing:
    outcome = _split("outcome:N", "outcome", {"answered": "#54a24b", "not answered": "#bab0ac"})
    tips = _tips(
        ("campaign:N", "campaign"),
        ("outcome:N", "outcome"),
        ("calls:Q", "calls"),
        ("answer_rate_pct:Q", "answer rate (%)", ".2f"),
        ("cost_exact:N", "cost (exact)"),
    )
    campaign = alt.Y("campaign:N", title="campaign", sort="-x")
    return stacked_bars(rows, campaign, "calls:Q", "campaign calls (count)", outcome, tips)


def sms(rows: list[Row]) -> Drawing:
    delivery = _split("status:N", "delivery", {"sent": "#4c78a8", "failed": "#e45756"})
    tips = _tips(
        ("date:O", "day"),
        ("status:N", "delivery"),
        ("messages:Q", "SMS"),
        ("segments:Q", "segments (day)"),
        ("canned:Q", "canned (day)"),
        ("free_text:Q", "free text (day)"),
        ("cost_exact:N", "cost (day, exact)"),
    )
    return stacked_bars(rows, DAY, "messages:Q", "SMS (count)", delivery, tips)


def balance(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("snapshot_date:O", title="snapshot day (UTC)", axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("amount:Q", title="balance (account currency)", scale=alt.Scale(zero=False)),
            tooltip=[
                _tip("snapshot_at:N", "read at (UTC)"),
                _tip("amount_exact:N", "balance (exact)"),
                _tip("change_exact:N", "change since previous (exact)"),
            ],
        )
    )
