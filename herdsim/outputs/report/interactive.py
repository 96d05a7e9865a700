"""The report's interactive timeline: inline data and a small hand-written canvas zoom.

No library and no network: the data travel inside the page as JSON. Downstream calls per
second at the run's bin width over the whole run; retries landing per second at 10 ms
only around the spikes (elsewhere at the bin width), so a 10 ms impulse survives zooming
from a 90 s axis down to a few bins while the page stays small.
"""

from __future__ import annotations

import json

import numpy as np

from herdsim.plots.landing import RESOLUTION, landing_counts, landings
from herdsim.plots.style import arm_styles, one

SPIKE_FACTOR = 3.0  # a 10 ms bin this many times its bin's mean rate (and >= 5) is a spike
MARGIN = 0.3  # s of 10 ms bins kept either side of a spike
MAX_FINE = 20_000  # 10 ms bins per arm at most (the busiest spikes win)


def _spans(fine: np.ndarray, coarse_mean: np.ndarray, lo: float) -> list[tuple[int, int]]:
    """Runs of 10 ms bins (index ranges) around the spikes, merged and capped."""
    hot = np.flatnonzero((fine >= 5) & (fine > SPIKE_FACTOR * np.maximum(coarse_mean, 0.5)))
    if hot.size == 0:
        return []
    pad = int(round(MARGIN / RESOLUTION))
    spans: list[list[int]] = []
    for i in hot:
        a, b = max(0, i - pad), min(len(fine), i + pad + 1)
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    spans.sort(key=lambda s: -int(fine[s[0]:s[1]].max()))
    kept, total = [], 0
    for a, b in spans:
        if total + (b - a) > MAX_FINE:
            continue
        kept.append((a, b))
        total += b - a
    return sorted(kept)


def payload(c, replication: int = 0) -> dict:
    """What the page plots: per arm, calls/s per bin and the landing segments."""
    sc = c.scenario
    styles = arm_styles(c.arms)
    arms = []
    for arm in c.arms:
        width = arm.scenario.bin
        ts = one(c.timeseries, arm.label, replication)
        calls = (ts["attempts"].to_numpy() / width).round(1)
        times = landings(one(c.sleeps, arm.label, replication))
        edges, fine = landing_counts(times, 0.0, sc.duration)
        per_bin = int(round(width / RESOLUTION))
        n = len(fine) // per_bin * per_bin
        coarse = fine[:n].reshape(-1, per_bin).sum(axis=1)
        coarse_mean = np.repeat(coarse / per_bin, per_bin)
        coarse_mean = np.pad(coarse_mean, (0, len(fine) - n), mode="edge")
        spans = _spans(fine, coarse_mean, 0.0)
        arms.append({
            "label": arm.label, "color": styles[arm.label]["color"],
            "calls": calls.tolist(),
            "landBins": (coarse / width).round(1).tolist(),
            "fine": [[round(a * RESOLUTION, 6), (fine[a:b] / RESOLUTION).round(1).tolist()]
                     for a, b in spans],
        })
    capacity = None if sc.downstream.model == "occ" else sc.downstream.capacity_rate()
    return {"bin": sc.bin, "res": RESOLUTION, "duration": sc.duration, "capacity": capacity,
            "outages": [list(w) for w in sc.outage_windows], "arms": arms}


HTML = """
<section id="explore">
<h2>Explore the timeline</h2>
<p class="controls">Wheel or +/&minus; to zoom around the cursor, drag to pan, double-click
to reset. <button type="button" id="hs-spike">zoom into the biggest spike</button>
<button type="button" id="hs-reset">whole run</button>
<label><input type="checkbox" id="hs-log"> log scale</label>
<span id="hs-arms"></span></p>
<canvas id="hs-canvas" width="1100" height="520" tabindex="0"
  aria-label="downstream calls and retries landing over time"></canvas>
<p id="hs-readout" class="note">&nbsp;</p>
<p class="note">Top: downstream calls per second, averaged over each bin. Bottom: retries
landing per second (a retry lands when its sleep ends), at 10 ms near the spikes and
per bin elsewhere. Grey: outage; dashed: capacity.</p>
</section>
<script id="hs-data" type="application/json">__DATA__</script>
<script>__JS__</script>
"""

JS = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("hs-data").textContent);
  var cv = document.getElementById("hs-canvas"), g = cv.getContext("2d");
  var ratio = window.devicePixelRatio || 1, W = cv.width, H = cv.height;
  cv.width = W * ratio; cv.height = H * ratio; cv.style.width = "100%";
  g.scale(ratio, ratio);
  var shown = D.arms.map(function () { return true; });
  var view = [0, D.duration], logY = false, L = 70, R = 12;
  var panels = [{top: 26, h: 200, key: "calls", name: "calls/s"},
                {top: 290, h: 200, key: "land", name: "retries landing/s"}];
  function segments(arm, key) {  // [t0, width, value] pieces, finest available
    var out = [], i;
    if (key === "calls") {
      for (i = 0; i < arm.calls.length; i++) out.push([i * D.bin, D.bin, arm.calls[i]]);
      return out;
    }
    var fine = arm.fine, f = 0, t = 0;
    for (i = 0; i < arm.landBins.length; i++) {
      t = i * D.bin;
      while (f < fine.length && fine[f][0] + fine[f][1].length * D.res <= t + 1e-9) f++;
      if (f < fine.length && fine[f][0] < t + D.bin - 1e-9 &&
          fine[f][0] + fine[f][1].length * D.res > t + 1e-9) {
        var a = Math.max(t, fine[f][0]), b = Math.min(t + D.bin, fine[f][0] +
            fine[f][1].length * D.res);
        if (a > t + 1e-9) out.push([t, a - t, arm.landBins[i]]);
        for (var k = Math.round((a - fine[f][0]) / D.res);
             k < Math.round((b - fine[f][0]) / D.res); k++)
          out.push([fine[f][0] + k * D.res, D.res, fine[f][1][k]]);
        if (b < t + D.bin - 1e-9) out.push([b, t + D.bin - b, arm.landBins[i]]);
      } else out.push([t, D.bin, arm.landBins[i]]);
    }
    return out;
  }
  var series = D.arms.map(function (a) {
    return {calls: segments(a, "calls"), land: segments(a, "land")};
  });
  function x(t) { return L + (t - view[0]) / (view[1] - view[0]) * (W - L - R); }
  function tAt(px) { return view[0] + (px - L) / (W - L - R) * (view[1] - view[0]); }
  function ticks(lo, hi, n) {
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m;
      return true; } return false; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) out.push(v);
    return out;
  }
  function fmt(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (Math.abs(v) >= 1e3) return (v / 1e3).toPrecision(3) + "k";
    return String(+v.toPrecision(3));
  }
  function draw() {
    g.clearRect(0, 0, W, H);
    g.font = "12px system-ui, sans-serif";
    panels.forEach(function (p) {
      var top = 1;
      series.forEach(function (s, i) {
        if (!shown[i]) return;
        s[p.key].forEach(function (q) {
          if (q[0] + q[1] >= view[0] && q[0] <= view[1]) top = Math.max(top, q[2]);
        });
      });
      if (p.key === "calls" && D.capacity && D.capacity < top * 20)
        top = Math.max(top, D.capacity);
      top *= 1.1;
      var y = logY ? function (v) { var lv = Math.log10(Math.max(v, 1)) / Math.log10(top);
        return p.top + p.h - lv * p.h; } :
        function (v) { return p.top + p.h - v / top * p.h; };
      g.fillStyle = "rgba(140,140,140,0.3)";
      D.outages.forEach(function (o) {
        var a = Math.max(x(o[0]), L), b = Math.min(x(o[1]), W - R);
        if (b > a) g.fillRect(a, p.top, b - a, p.h);
      });
      g.strokeStyle = "#ccc"; g.fillStyle = "#333"; g.lineWidth = 1;
      g.strokeRect(L, p.top, W - L - R, p.h);
      var yt = logY ? [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7].filter(function (v) {
        return v <= top; }) : ticks(0, top, 4);
      yt.forEach(function (v) { g.fillText(fmt(v), 4, y(v) + 4); });
      g.fillText(p.name, L + 4, p.top - 8);
      if (p.key === "calls" && D.capacity && y(D.capacity) > p.top) {
        g.setLineDash([6, 4]); g.strokeStyle = "#000"; g.beginPath();
        g.moveTo(L, y(D.capacity)); g.lineTo(W - R, y(D.capacity)); g.stroke();
        g.setLineDash([]);
      }
      g.save(); g.beginPath(); g.rect(L, p.top, W - L - R, p.h); g.clip();
      series.forEach(function (s, i) {
        if (!shown[i]) return;
        g.strokeStyle = D.arms[i].color; g.lineWidth = 1.4; g.beginPath();
        var first = true;
        s[p.key].forEach(function (q) {
          if (q[0] + q[1] < view[0] || q[0] > view[1]) return;
          if (first) { g.moveTo(x(q[0]), y(q[2])); first = false; }
          else g.lineTo(x(q[0]), y(q[2]));
          g.lineTo(x(q[0] + q[1]), y(q[2]));
        });
        g.stroke();
      });
      g.restore();
    });
    g.fillStyle = "#333";
    ticks(view[0], view[1], 8).forEach(function (t) {
      g.fillText(+t.toPrecision(6) + " s", x(t) - 12, H - 8);
    });
    var span = view[1] - view[0];
    document.body.dataset.view = view[0].toFixed(3) + "," + view[1].toFixed(3);
    document.body.dataset.finest = span < 20 * D.bin ? String(D.res) : String(D.bin);
  }
  function zoom(factor, around) {
    var a = around - (around - view[0]) * factor, b = around + (view[1] - around) * factor;
    if (b - a < 5 * D.res) return;
    view = [Math.max(0, a), Math.min(D.duration, b)];
    draw();
  }
  function spike() {  // the biggest 10 ms bin of any shown arm, 0.5 s either side
    var best = -1, at = 0;
    D.arms.forEach(function (a, i) {
      if (!shown[i]) return;
      a.fine.forEach(function (f) { f[1].forEach(function (v, k) {
        if (v > best) { best = v; at = f[0] + k * D.res; } }); });
    });
    if (best < 0) return false;
    view = [Math.max(0, at - 0.5), Math.min(D.duration, at + 0.5)];
    draw();
    return true;
  }
  cv.addEventListener("wheel", function (e) {
    e.preventDefault();
    var rect = cv.getBoundingClientRect();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, tAt((e.clientX - rect.left) * W / rect.width));
  }, {passive: false});
  var drag = null;
  cv.addEventListener("mousedown", function (e) { drag = [e.clientX, view.slice()]; });
  window.addEventListener("mouseup", function () { drag = null; });
  cv.addEventListener("mousemove", function (e) {
    var rect = cv.getBoundingClientRect(), px = (e.clientX - rect.left) * W / rect.width;
    if (drag) {
      var dt = (e.clientX - drag[0]) * W / rect.width / (W - L - R) * (drag[1][1] - drag[1][0]);
      var a = drag[1][0] - dt, b = drag[1][1] - dt;
      if (a >= 0 && b <= D.duration) { view = [a, b]; draw(); }
    }
    document.getElementById("hs-readout").textContent = "t = " +
      tAt(px).toFixed(3) + " s";
  });
  cv.addEventListener("dblclick", function () { view = [0, D.duration]; draw(); });
  cv.addEventListener("keydown", function (e) {
    var mid = (view[0] + view[1]) / 2;
    if (e.key === "+" || e.key === "=") zoom(0.5, mid);
    if (e.key === "-") zoom(2, mid);
  });
  document.getElementById("hs-spike").addEventListener("click", spike);
  document.getElementById("hs-reset").addEventListener("click", function () {
    view = [0, D.duration]; draw(); });
  document.getElementById("hs-log").addEventListener("change", function (e) {
    logY = e.target.checked; draw(); });
  var box = document.getElementById("hs-arms");
  D.arms.forEach(function (a, i) {
    var label = document.createElement("label"), input = document.createElement("input");
    input.type = "checkbox"; input.checked = true;
    input.addEventListener("change", function () { shown[i] = input.checked; draw(); });
    label.style.color = a.color; label.appendChild(input);
    label.appendChild(document.createTextNode(" " + a.label + " "));
    box.appendChild(label);
  });
  draw();
  if (location.hash === "#zoom-spike") spike();
  document.body.dataset.ready = "yes";
})();
"""


def section(c) -> str:
    """The timeline's HTML: controls, canvas, inline JSON data and inline script."""
    data = json.dumps(payload(c), separators=(",", ":")).replace("</", "<\\/")
    return HTML.replace("__DATA__", data).replace("__JS__", JS)
