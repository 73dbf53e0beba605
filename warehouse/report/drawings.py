"""How each chart of the report is drawn: an altair (Vega-Lite) chart over the rows it is given.

Most charts are bars of one count stacked by a category (`stacked_bars`): one column per day,
or one horizontal bar per name (campaigns, agents); the weekday x hour view is a heatmap. Every
chart carries its rows inline, so the page needs no data but its own. Each drawing gets its
rows and the money unit (`CDRHOUSE_CURRENCY`, else "account currency") for its axis titles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt

from warehouse.report.data import Drawing, Row

DAY = alt.X("date:O", title="day (UTC)", axis=alt.Axis(labelAngle=-45))
LOCAL_DAY = alt.X("date:O", title="day (local)", axis=alt.Axis(labelAngle=-45))
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


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


def volume(rows: list[Row], _money: str) -> Drawing:
    tips = _tips(("date:O", "day"), ("type:N", "type"), ("cdrs:Q", "CDRs"))
    return stacked_bars(rows, DAY, "cdrs:Q", "CDRs (count)", _split("type:N", "CDR type"), tips)


def cost(rows: list[Row], money: str) -> Drawing:
    tips = _tips(
        ("date:O", "day"), ("type:N", "type"), ("cost_exact:N", "cost (exact)"), ("cdrs:Q", "CDRs")
    )
    by_type = _split("type:N", "CDR type")
    return stacked_bars(rows, DAY, "cost:Q", f"cost ({money})", by_type, tips)


def heatmap(rows: list[Row], _money: str) -> Drawing:
    """Two grids of the same cells: offered calls, and the service level of the calls."""
    weekday = alt.Y("weekday:O", title="weekday (local)", sort=WEEKDAYS)
    hour = alt.X("hour:O", title="hour of day (local time)", axis=alt.Axis(labelAngle=0))
    tips = _tips(
        ("weekday:O", "weekday"),
        ("hour:O", "hour"),
        ("offered:Q", "offered calls"),
        ("answered:Q", "answered"),
        ("abandoned:Q", "abandoned"),
        ("service_level_pct:Q", "service level (%)", ".1f"),
    )
    offered = (
        alt.Chart()
        .mark_rect()
        .encode(
            x=hour,
            y=weekday,
            color=alt.Color(
                "offered:Q",
                title="offered calls (count)",
                scale=alt.Scale(scheme="blues"),
                legend=alt.Legend(orient="bottom", gradientLength=200),
            ),
            tooltip=tips,
        )
        .properties(width=420, height=190, title="offered calls")
    )
    served = (
        alt.Chart()
        .transform_filter("isValid(datum.service_level_pct)")
        .mark_rect()
        .encode(
            x=hour,
            y=weekday.axis(None),
            color=alt.Color(
                "service_level_pct:Q",
                title="service level (%)",
                scale=alt.Scale(scheme="redyellowgreen", domain=[0, 100]),
                legend=alt.Legend(orient="bottom", gradientLength=200),
            ),
            tooltip=tips,
        )
        .properties(width=420, height=190, title="service level")
    )
    return alt.hconcat(offered, served, data=_data(rows)).resolve_scale(color="independent")


# Each SLA kind in its own hue, met dark and breached light: the legend names every bar.
SLA_SERIES = {
    "first response: met": "#2f6f9f",
    "first response: breached": "#a6cbe8",
    "resolution: met": "#3d8b37",
    "resolution: breached": "#b5dfa9",
    "avg reply: met": "#c0661e",
    "avg reply: breached": "#f7c28f",
}


def sla(rows: list[Row], _money: str) -> Drawing:
    series = alt.Color(
        "series:N",
        title="SLA kind: status",
        scale=alt.Scale(domain=list(SLA_SERIES), range=list(SLA_SERIES.values())),
        legend=alt.Legend(orient="right", symbolType="square"),
    )
    tips = _tips(
        ("date:O", "day"),
        ("sla:N", "SLA"),
        ("status:N", "status"),
        ("conversations:Q", "conversations"),
        ("evaluated:Q", "evaluated (met + breached)"),
    )
    return stacked_bars(
        rows,
        LOCAL_DAY,
        "conversations:Q",
        "conversations (count)",
        series,
        tips,
        xOffset=alt.XOffset("sla:N", title="SLA", sort=["first response", "resolution"]),
        order=alt.Order("status:N", sort="descending"),
    )


def outbound(rows: list[Row], _money: str) -> Drawing:
    outcome = _split("outcome:N", "outcome", {"connected": "#54a24b", "not connected": "#bab0ac"})
    tips = _tips(
        ("campaign:N", "campaign"),
        ("attempts:Q", "attempts"),
        ("connects:Q", "connects"),
        ("connect_rate_pct:Q", "connect rate (%)", ".1f"),
        ("talk_h:Q", "talk (h)", ".2f"),
    )
    campaign = alt.Y(
        "campaign:N", title="campaign", sort=alt.EncodingSortField("attempts", "max", "descending")
    )
    calls = stacked_bars(None, campaign, "calls:Q", "outbound calls (count)", outcome, tips)
    base = (
        alt.Chart()
        .transform_filter("datum.outcome == 'connected'")
        .encode(
            y=campaign.axis(None),
            x=alt.X(
                "connect_rate_pct:Q", title="connect rate (%)", scale=alt.Scale(domain=[0, 100])
            ),
            tooltip=tips,
        )
    )
    # The rate written at the end of each bar (a text mark: not a bar to count).
    labels = base.mark_text(align="left", dx=3, fontSize=11).encode(
        text=alt.Text("connect_rate_pct:Q", format=".1f")
    )
    rate = (base.mark_bar(color="#54a24b") + labels).properties(width=260)
    return alt.hconcat(calls.properties(width=380), rate, data=_data(rows))


def agents(rows: list[Row], _money: str) -> Drawing:
    agent = alt.Y("agent:N", title="agent", sort=alt.EncodingSortField("rank", "min", "ascending"))
    kind = _split("kind:N", "contact", {"calls": "#4c78a8", "conversations": "#72b7b2"})
    tips = _tips(
        ("rank:Q", "rank"),
        ("agent:N", "agent"),
        ("handled:Q", "handled contacts"),
        ("calls_handled:Q", "calls"),
        ("conversations_handled:Q", "conversations"),
        ("talk_h:Q", "talk (h)", ".2f"),
        ("aht_s:Q", "call AHT (s, no after-call work)", ".1f"),
    )
    handled = stacked_bars(
        None, agent, "contacts:Q", "handled contacts (calls + conversations)", kind, tips
    )
    talk = stacked_bars(None, agent.axis(None), "kind_talk_h:Q", "talk time (hours)", kind, tips)
    return alt.hconcat(handled.properties(width=320), talk.properties(width=320), data=_data(rows))


def sms(rows: list[Row], _money: str) -> Drawing:
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


def balance(rows: list[Row], money: str) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("snapshot_date:O", title="snapshot day (UTC)", axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("amount:Q", title=f"balance ({money})", scale=alt.Scale(zero=False)),
            tooltip=[
                _tip("snapshot_at:N", "read at (UTC)"),
                _tip("amount_exact:N", "balance (exact)"),
                _tip("change_exact:N", "change since previous (exact)"),
            ],
        )
    )
