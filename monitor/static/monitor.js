// The monitor page: polls api/state and draws it, tables as HTML and
// charts as plain SVG. Every row and chart carries data-* attributes
// (data-row, data-topic, data-group, data-partition, data-lag, ...) for
// scripts and tests to read the numbers shown.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const MAX_LEGEND = 6;

  // el makes an HTML element with attributes (data-* and class included)
  // and children (strings become text nodes).
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    for (const c of children || []) {
      e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
    }
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // niceTicks returns about count round values covering [lo, hi].
  // Integer ticks (integer true) are at least 1 apart.
  function niceTicks(lo, hi, count, integer) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = integer ? Math.max(1, (hi - lo) / count) : (hi - lo) / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw) || 10 * mag;
    const ticks = [];
    const top = Math.ceil(hi / step - 1e-9) * step;
    for (let v = Math.ceil(lo / step) * step; v <= top + step * 1e-9; v += step) {
      ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return { ticks, step };
  }

  function fmtNum(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (Math.abs(v) >= 1e4) return (v / 1e3).toPrecision(3) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(Math.abs(v) < 10 ? 1 : 0);
  }

  // lineChart draws series ([{name, points: [[x, y], ...]}]) with x in
  // seconds before the newest sample, labelled axes and a legend.
  function lineChart(opt) {
    const W = 380, H = 230, L = 52, R = 12, T = 44, B = 40;
    const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
    root.append(svg("title", {}, opt.title));
    root.append(svg("text", { x: L, y: 16, class: "title" }, opt.title));
    let xmin = 0, ymax = 0;
    for (const s of opt.series) {
      for (const [x, y] of s.points) { xmin = Math.min(xmin, x); ymax = Math.max(ymax, y); }
    }
    if (xmin > -5) xmin = -5;
    const yt = niceTicks(0, ymax > 0 ? ymax : 1, 5, opt.integer);
    const ytop = yt.ticks[yt.ticks.length - 1] || 1;
    const xt = niceTicks(xmin, 0, 6);
    const px = x => L + (x - xmin) / (0 - xmin) * (W - L - R);
    const py = y => T + (1 - y / ytop) * (H - T - B);
    for (const v of yt.ticks) {
      root.append(svg("line", { x1: L, x2: W - R, y1: py(v), y2: py(v), class: "grid" }));
      root.append(svg("text", { x: L - 6, y: py(v) + 4, "text-anchor": "end" }, fmtNum(v)));
    }
    for (const v of xt.ticks) {
      if (v < xmin) continue;
      root.append(svg("line", { x1: px(v), x2: px(v), y1: H - B, y2: H - B + 4, class: "axis" }));
      root.append(svg("text", { x: px(v), y: H - B + 16, "text-anchor": "middle" }, v === 0 ? "now" : fmtNum(v)));
    }
    root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "time (seconds before the latest sample)"));
    root.append(svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${(T + H - B) / 2})` }, opt.yLabel));
    opt.series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      if (s.points.length > 0) {
        const d = s.points.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join("");
        root.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.6, "data-series": s.name, "data-points": s.points.length }));
      }
      if (i < MAX_LEGEND) {
        const lx = L + 46 * i;
        root.append(svg("rect", { x: lx, y: 28, width: 12, height: 3, fill: color }));
        root.append(svg("text", { x: lx + 16, y: 32 }, s.name));
      }
    });
    if (opt.series.length > MAX_LEGEND) {
      root.append(svg("text", { x: L + 46 * MAX_LEGEND, y: 32 }, `+${opt.series.length - MAX_LEGEND}`));
    }
    return root;
  }

  // seriesOf returns, for each partition, the points [x, value] that pick
  // takes from each sample's topic entry (null: no value in that sample).
  function seriesOf(history, topic, count, pick) {
    const series = [];
    const last = history.length ? Date.parse(history[history.length - 1].time) : 0;
    for (let p = 0; p < count; p++) series.push({ name: "p" + p, points: [] });
    for (const s of history) {
      const t = (s.topics || []).find(t => t.topic === topic);
      if (!t) continue;
      const x = (Date.parse(s.time) - last) / 1000;
      for (let p = 0; p < count; p++) {
        const v = pick(t, p);
        if (v !== null && v !== undefined) series[p].points.push([x, v]);
      }
    }
    return series;
  }

  function partitionsTable(t) {
    const rows = t.partitions.map(p => el("tr", {
      "data-row": "partition", "data-topic": t.topic, "data-partition": p.partition,
      "data-log-start": p.log_start, "data-log-end": p.log_end, "data-rate": p.rate,
    }, [
      el("td", { "data-col": "partition" }, ["p" + p.partition]),
      el("td", { "data-col": "log-start" }, [p.log_start]),
      el("td", { "data-col": "log-end" }, [p.log_end]),
      el("td", { "data-col": "retained" }, [p.retained]),
      el("td", { "data-col": "rate" }, [fmtNum(p.rate)]),
    ]));
    return el("table", { "data-table": "partitions", "data-topic": t.topic }, [
      el("thead", {}, [el("tr", {}, ["partition", "log start", "log end", "retained", "records/s"].map(h => el("th", {}, [h])))]),
      el("tbody", {}, rows),
    ]);
  }

  function groupsTable(t) {
    const rows = t.groups.map(g => el("tr", {
      "data-row": "group", "data-topic": t.topic, "data-group": g.group, "data-assignor": g.assignor,
      "data-members": g.members.join(" "), "data-lag": g.lag, "data-in-flight": g.in_flight,
    }, [
      el("td", { class: "text", "data-col": "group" }, [g.group]),
      el("td", { class: "text", "data-col": "assignor" }, [g.assignor]),
      el("td", { class: "text", "data-col": "members" }, [g.members.length ? g.members.join(", ") : "none"]),
      el("td", { "data-col": "in-flight" }, [g.in_flight]),
      el("td", { "data-col": "lag", class: g.lag > 0 ? "lag-nonzero" : "" }, [g.lag]),
    ]));
    return el("table", { "data-table": "groups", "data-topic": t.topic }, [
      el("thead", {}, [el("tr", {}, [
        el("th", { class: "text" }, ["group"]), el("th", { class: "text" }, ["assignor"]),
        el("th", { class: "text" }, ["members"]), el("th", {}, ["in flight"]), el("th", {}, ["lag"])])]),
      el("tbody", {}, rows),
    ]);
  }

  function groupPartitions(t, g) {
    const rows = g.partitions.map(p => el("tr", {
      "data-row": "group-partition", "data-topic": t.topic, "data-group": g.group, "data-partition": p.partition,
      "data-owner": p.owner, "data-committed": p.committed, "data-in-flight": p.in_flight,
      "data-attempts": p.attempts, "data-lag": p.lag,
    }, [
      el("td", { "data-col": "partition" }, ["p" + p.partition]),
      el("td", { class: "text", "data-col": "owner" }, [p.owner || "-"]),
      el("td", { "data-col": "committed" }, [p.committed]),
      el("td", { "data-col": "in-flight" }, [p.in_flight ? "yes" : "no"]),
      el("td", { "data-col": "attempts" }, [p.attempts]),
      el("td", { "data-col": "lag", class: p.lag > 0 ? "lag-nonzero" : "" }, [p.lag]),
    ]));
    return el("div", { class: "group", "data-group": g.group }, [
      el("h3", {}, [`group ${g.group}, by partition`]),
      el("table", { "data-table": "group-partitions", "data-topic": t.topic, "data-group": g.group }, [
        el("thead", {}, [el("tr", {}, ["partition", "owner", "committed", "in flight", "attempts", "lag"].map(
          (h, i) => el("th", i === 1 ? { class: "text" } : {}, [h])))]),
        el("tbody", {}, rows),
      ]),
    ]);
  }

  function topicSection(t, history) {
    const n = t.partitions.length;
    const rate = t.partitions.reduce((a, p) => a + p.rate, 0);
    const retained = t.partitions.reduce((a, p) => a + p.retained, 0);
    const charts = [];
    const rc = lineChart({
      title: `records appended per second, by partition`, yLabel: "records/s",
      series: seriesOf(history, t.topic, n, (ts, p) => p < ts.rate.length ? ts.rate[p] : null),
    });
    rc.setAttribute("data-chart", "rate");
    rc.setAttribute("data-topic", t.topic);
    charts.push(rc);
    for (const g of t.groups) {
      const lc = lineChart({
        title: `lag of group ${g.group}, by partition`, yLabel: "lag (records)", integer: true,
        series: seriesOf(history, t.topic, n, (ts, p) => {
          const gs = ts.groups.find(x => x.group === g.group);
          return gs && p < gs.lag.length ? gs.lag[p] : null;
        }),
      });
      lc.setAttribute("data-chart", "lag");
      lc.setAttribute("data-topic", t.topic);
      lc.setAttribute("data-group", g.group);
      charts.push(lc);
    }
    return el("section", { class: "topic", "data-topic": t.topic, id: "topic-" + t.topic }, [
      el("h2", {}, [`topic ${t.topic}`]),
      el("p", {}, [`${n} partition${n === 1 ? "" : "s"}, ${retained} retained, ${fmtNum(rate)} records/s appended, ${t.groups.length} group${t.groups.length === 1 ? "" : "s"}`]),
      el("div", { class: "charts" }, charts),
      el("div", { class: "tables" }, [
        el("div", {}, [el("h3", {}, ["partitions"]), partitionsTable(t)]),
        el("div", {}, [el("h3", {}, ["consumer groups"]),
          t.groups.length ? groupsTable(t) : el("p", { class: "empty" }, ["none"])]),
        ...t.groups.map(g => groupPartitions(t, g))]),
    ]);
  }

  function deadLetters(st) {
    const rows = st.dead_letters.map(d => el("tr", {
      "data-row": "dead-letter", "data-topic": d.topic, "data-group": d.group, "data-partition": d.partition,
      "data-offset": d.offset, "data-attempt": d.attempt, "data-dlq-topic": d.dlq_topic,
    }, [
      el("td", { class: "text" }, [new Date(d.time).toLocaleTimeString()]),
      el("td", { class: "text" }, [d.topic]), el("td", { class: "text" }, [d.group]),
      el("td", {}, ["p" + d.partition]), el("td", {}, [d.offset]), el("td", {}, [d.attempt]),
      el("td", { class: "text" }, [d.dlq_topic]), el("td", { class: "text" }, [d.cause]),
    ]));
    return el("section", { id: "dead-letters", "data-total": st.dead_letters_total }, [
      el("h2", {}, [`recent dead letters (${st.dead_letters.length} shown, ${st.dead_letters_total} in all)`]),
      rows.length ? el("table", { "data-table": "dead-letters" }, [
        el("thead", {}, [el("tr", {}, ["time", "topic", "group", "partition", "offset", "attempt", "dead-letter topic", "cause"].map(
          h => el("th", { class: "text" }, [h])))]),
        el("tbody", {}, rows),
      ]) : el("p", { class: "empty" }, ["none"]),
    ]);
  }

  function render(st) {
    const app = document.getElementById("app");
    const parts = st.topics.length ? st.topics.map(t => topicSection(t, st.history)) : [el("p", { class: "empty" }, ["no topics"])];
    app.replaceChildren(...parts, deadLetters(st));
    const status = document.getElementById("status");
    status.setAttribute("data-status", "ok");
    status.textContent = `state of ${new Date(st.time).toLocaleTimeString()} · sampling every ${st.interval_ms / 1000} s · ${st.history.length} samples`;
    document.body.setAttribute("data-state-time", st.time);
    document.body.setAttribute("data-ready", "true");
  }

  let interval = 1000;
  async function poll() {
    try {
      const r = await fetch("api/state", { cache: "no-store" });
      if (!r.ok) throw new Error(`api/state: ${r.status} ${r.statusText}`);
      const st = await r.json();
      interval = Math.max(250, st.interval_ms || 1000);
      render(st);
    } catch (e) {
      const status = document.getElementById("status");
      status.setAttribute("data-status", "error");
      status.textContent = `cannot read the state: ${e.message}`;
    }
    setTimeout(poll, interval);
  }
  poll();
})();
