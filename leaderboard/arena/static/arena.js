// Arena pages: draw the plotly figures the server embedded as JSON (in the page's light or dark
// colours, redrawn when the theme changes), open a battle's 3D view (plotly.js is fetched only
// then), submit the task picker on change, and the vote keys. Served from /arena/assets (the
// leaderboard's CSP allows scripts from 'self' only).
(function () {
  var drawn = [];  // [element, figure]: recoloured on a theme change

  function colours() {
    var css = getComputedStyle(document.documentElement);
    function v(name, fallback) { return css.getPropertyValue(name).trim() || fallback; }
    return {panel: v("--panel", "#ffffff"), text: v("--text", "#1f2937"), line: v("--line", "#e5e7eb"),
            grid: v("--grid", "#eef2f7"), muted: v("--muted", "#64748b")};
  }

  function themed(fig, el) {
    var c = colours();
    var layout = JSON.parse(JSON.stringify(fig.layout || {}));
    var data = JSON.parse(JSON.stringify(fig.data || []));
    layout.paper_bgcolor = c.panel; layout.plot_bgcolor = c.panel;
    layout.font = Object.assign({}, layout.font || {}, {color: c.text});
    if (layout.title && typeof layout.title === "object") layout.title.font = Object.assign({}, layout.title.font || {}, {color: c.text});
    Object.keys(layout).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) layout[key] = Object.assign({}, layout[key], {gridcolor: c.grid, linecolor: c.line, zerolinecolor: c.line});
    });
    if (layout.scene) {  // mesh3d: the scene's background and axes follow the page too
      ["xaxis", "yaxis", "zaxis"].forEach(function (a) {
        layout.scene[a] = Object.assign({}, layout.scene[a] || {}, {gridcolor: c.grid, color: c.muted, backgroundcolor: c.panel});
      });
    }
    // a narrow chart (a phone): model names are cut to a few characters (the table has them whole),
    // so the plot keeps most of the width
    var px = el.clientWidth || 600;
    if (px < 640) {
      if (layout.margin) layout.margin = Object.assign({}, layout.margin, {l: 58, r: 10, b: 40});
      var keep = Math.max(8, Math.floor(px / 30));
      var first = data[0] || {};
      [["xaxis", first.x], ["yaxis", first.y]].forEach(function (pair) {
        var names = pair[1];
        if (!Array.isArray(names) || typeof names[0] !== "string") return;
        layout[pair[0]] = Object.assign({}, layout[pair[0]] || {}, {tickmode: "array", tickvals: names,
          ticktext: names.map(function (n) { return n.length > keep ? n.slice(0, keep - 1) + "…" : n; })});
      });
    }
    data.forEach(function (trace) {  // the count heatmap's near-white end would glare on a dark page
      if (trace.type === "heatmap" && Array.isArray(trace.colorscale) && trace.colorscale[0][1] === "#f8fafc") {
        trace.colorscale = [[0, c.panel], trace.colorscale[trace.colorscale.length - 1]];
      }
    });
    return {data: data, layout: layout};
  }

  function config(el) {
    return {responsive: true, displaylogo: false, displayModeBar: el.clientWidth >= 640 ? "hover" : false};
  }

  function plot(el, fig) {
    var t = themed(fig, el);
    window.Plotly.newPlot(el, t.data, t.layout, config(el));
    drawn.push([el, fig]);
  }

  function plotlyFrom(src) {
    if (window.Plotly) return Promise.resolve();
    return new Promise(function (resolve, reject) {
      var tag = document.createElement("script");
      tag.src = src; tag.onload = resolve; tag.onerror = reject;
      document.head.appendChild(tag);
    });
  }

  document.addEventListener("harness:theme", function () {
    drawn.forEach(function (pair) {
      var t = themed(pair[1], pair[0]);
      window.Plotly.react(pair[0], t.data, t.layout, config(pair[0]));
    });
  });

  function draw() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
    document.querySelectorAll("button[data-mesh]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var view = btn.nextElementSibling;
        btn.disabled = true;
        plotlyFrom(btn.getAttribute("data-plotly")).then(function () {
          return fetch(btn.getAttribute("data-mesh"));
        }).then(function (r) { return r.json(); }).then(function (fig) {
          if (!window.Plotly || !fig.data) { btn.textContent = fig.error || "3D view unavailable"; return; }
          btn.style.display = "none";
          plot(view, fig);
        }).catch(function () { btn.textContent = "3D view unavailable"; });
      });
    });
    var form = document.getElementById("vote-form");
    if (form) {
      document.addEventListener("keydown", function (e) {
        if (e.ctrlKey || e.metaKey || e.altKey || /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
        var ids = {"1": "vote-left", "2": "vote-right", "3": "vote-tie", "4": "vote-both-bad"};
        var target = ids[e.key] && document.getElementById(ids[e.key]);
        if (target) { e.preventDefault(); if (!target.disabled) target.click(); }
        else if (e.key === "s" || e.key === "S") { e.preventDefault(); document.getElementById("skip").click(); }
      });
    }
    if (!window.Plotly) return;
    document.querySelectorAll("[data-arena-figure]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-arena-figure"));
      if (src) plot(el, JSON.parse(src.textContent));
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
