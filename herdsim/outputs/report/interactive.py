"""The report's interactive timeline: inline data and a small hand-written canvas zoom.

No library and no network: the data travel inside the page as JSON. Both panels have one
resolution: per bin of the run, the busiest ``peak_window`` (10 ms by default) of
downstream calls and of retries landing, as counts in that window (a peak stated in the
window it was measured in, never scaled up to a second); so a 10 ms impulse survives at any
zoom, and zoomed in, the retries landing never outnumber the calls they become.
Directories saved without the short-window peaks show counts per bin in both panels.
"""

from __future__ import annotations

import html
import json

import numpy as np

from herdsim.plots import describe
from herdsim.plots.landing import landing_counts, landings
from herdsim.plots.style import arm_styles, one
from herdsim.policies.durations import format_duration


def busiest(fine: np.ndarray, per_bin: int, n_bins: int) -> np.ndarray:
    """The largest of every *per_bin* consecutive values, one per bin (*n_bins* of them)."""
    padded = np.zeros(n_bins * per_bin)
    used = min(len(fine), len(padded))
    padded[:used] = fine[:used]
    return padded.reshape(n_bins, per_bin).max(axis=1)


def payload(c, replication: int = 0) -> dict:
    """What the page plots: per arm and bin, calls and retries landing in the busiest
    ``peak_window`` of the bin (or both per bin), and the capacity in that window."""
    sc = c.scenario
    styles = arm_styles(c.arms)
    short = c.peaks is not None
    arms = []
    for arm in c.arms:
        width, window = arm.scenario.bin, arm.scenario.peak_window
        ts = one(c.timeseries, arm.label, replication)
        n = len(ts)
        times = landings(one(c.sleeps, arm.label, replication))
        if short:
            calls = one(c.peaks, arm.label, replication)["peak_rate"].to_numpy() * window
            per_bin = max(1, int(round(width / window)))
            _, fine = landing_counts(times, 0.0, n * width, resolution=width / per_bin)
            land = busiest(fine, per_bin, n)
        else:
            calls = ts["attempts"].to_numpy(dtype=float)
            _, coarse = landing_counts(times, 0.0, n * width, resolution=width)
            land = coarse[:n]
        arms.append({"label": arm.label, "color": styles[arm.label]["color"],
                     "calls": np.round(calls, 1).tolist(),
                     "landBins": np.round(land, 1).tolist()})
    capacity = describe.capacity(sc)  # the summary's capacity_rate rule
    window = sc.peak_window if short else sc.bin
    what = (f"in the busiest {format_duration(sc.peak_window)} of each "
            f"{format_duration(sc.bin)} bin" if short else
            f"in each {format_duration(sc.bin)} bin")
    return {"bin": sc.bin, "window": window, "unit": format_duration(window),
            "duration": sc.duration,
            "capacity": None if capacity is None else capacity * window,
            "outages": [list(w) for w in sc.outage_windows], "arms": arms, "what": what}


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
<p class="note">Top: downstream calls; bottom: retries landing (a retry lands when its
sleep ends); both counted __WHAT__. Grey: outage; dashed: what the healthy downstream
serves in that window.</p>
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
  var panels = [{top: 26, h: 200, key: "calls", name: "calls per " + D.unit},
                {top: 290, h: 200, key: "land", name: "retries landing per " + D.unit}];
  function segments(arm, key) {  // [t0, width, value] per bin: one resolution
    var values = key === "calls" ? arm.calls : arm.landBins, out = [];
    for (var i = 0; i < values.length; i++) out.push([i * D.bin, D.bin, values[i]]);
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
    document.body.dataset.finest = String(D.window);
  }
  function zoom(factor, around) {
    var a = around - (around - view[0]) * factor, b = around + (view[1] - around) * factor;
    if (b - a < 5 * D.bin) return;
    view = [Math.max(0, a), Math.min(D.duration, b)];
    draw();
  }
  function spike() {  // the bin with the most retries landing, 0.5 s either side
    var best = -1, at = 0;
    D.arms.forEach(function (a, i) {
      if (!shown[i]) return;
      a.landBins.forEach(function (v, k) {
        if (v > best) { best = v; at = (k + 0.5) * D.bin; } });
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
    plotted = payload(c)
    data = json.dumps(plotted, separators=(",", ":")).replace("</", "<\\/")
    return (HTML.replace("__WHAT__", html.escape(plotted["what"]))
            .replace("__DATA__", data).replace("__JS__", JS))
