// Draws every chart whose figure JSON the server embedded (<script type="application/json">), in
// the page's colours (light or dark, redrawn when the theme changes), and the 3D viewer of mesh
// files on the run page. Pages are complete without this file: the tables carry the same numbers.
(function () {
  var drawn = [];  // [element, figure] pairs, to recolour on a theme change

  function colours() {
    var css = getComputedStyle(document.documentElement);
    function v(name) { return css.getPropertyValue(name).trim(); }
    return {panel: v("--panel"), text: v("--text"), muted: v("--muted"), line: v("--line"), grid: v("--grid")};
  }

  // a title longer than the chart is wide is wrapped at spaces (plotly would cut it at the edge)
  function wrap(text, width) {
    if (typeof text !== "string" || text.length <= width || text.indexOf("<br>") >= 0) return text;
    var lines = [], line = "";
    text.split(" ").forEach(function (word) {
      if (line && (line + " " + word).length > width) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    });
    if (line) lines.push(line);
    return lines.join("<br>");
  }
  function cut(text, width) {
    if (typeof text !== "string" || text.length <= width) return text;
    var head = Math.floor((width - 1) / 2);
    return text.slice(0, head) + "…" + text.slice(text.length - (width - 1 - head));
  }

  function fitted(layout, data, el) {
    var out = JSON.parse(JSON.stringify(layout || {}));
    var px = el.clientWidth || 600;
    var chars = Math.max(24, Math.floor(px / 8.5));
    var lines = 1;
    if (out.title) {
      if (typeof out.title === "string") out.title = {text: out.title};
      out.title.text = wrap(out.title.text, chars);
      lines = (out.title.text || "").split("<br>").length;
      if (lines > 1) {
        out.margin = Object.assign({}, out.margin || {}, {t: 26 + 20 * lines});
        Object.assign(out.title, {yref: "container", y: 1, yanchor: "top", pad: {t: 10}});
      }
    }
    Object.keys(out).forEach(function (key) {
      if (!/^[xy]axis\d*$/.test(key) || !out[key].title) return;
      var t = out[key].title;
      if (typeof t === "string") t = out[key].title = {text: t};
      // an axis title is centred on the plot area: the chart less its margins (and category labels)
      var labels = out.yaxis && out.yaxis.type === "category" ? px / 3 : 60;
      var room = key[0] === "x" ? Math.max(20, Math.floor((px - labels - 30) / 7.5))
        : Math.max(20, Math.floor(((out.height || el.clientHeight || 300) - 110) / 8));
      t.text = wrap(t.text, room);
    });
    // category labels (model names) take at most a third of a narrow chart
    if (px < 640 && out.yaxis && out.yaxis.type === "category" && data && data[0] && data[0].y) {
      var keep = Math.max(10, Math.floor(px / 3 / 6.5));
      out.yaxis.tickmode = "array";
      out.yaxis.tickvals = data[0].y;
      out.yaxis.ticktext = data[0].y.map(function (y) { return cut(String(y), keep); });
    }
    return out;
  }

  function themed(layout) {
    var c = colours();
    var out = JSON.parse(JSON.stringify(layout || {}));
    out.paper_bgcolor = c.panel;
    out.plot_bgcolor = c.panel;
    out.font = Object.assign({}, out.font || {}, {color: c.text});
    if (out.title && typeof out.title === "object") out.title.font = Object.assign({}, out.title.font || {}, {color: c.text});
    Object.keys(out).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        out[key] = Object.assign({}, out[key], {gridcolor: c.grid, linecolor: c.line, zerolinecolor: c.line});
      }
    });
    out.legend = Object.assign({bgcolor: "rgba(0,0,0,0)"}, out.legend || {});
    out.hoverlabel = Object.assign({}, out.hoverlabel || {}, {bgcolor: c.panel, font: {color: c.text}});
    return out;
  }

  function config(el) {
    // the mode bar covers titles on a narrow chart: shown only where there is room beside the title
    return {responsive: true, displaylogo: false, displayModeBar: el.clientWidth >= 640 ? "hover" : false};
  }

  // a trace drawn in black (a family's Pareto line) would vanish on the dark background: drawn in the text colour
  function inked(data) {
    var text = colours().text;
    return (data || []).map(function (trace) {
      var out = trace;
      ["line", "marker"].forEach(function (part) {
        var c = trace[part] && trace[part].color;
        if (c === "black" || c === "#000" || c === "#000000") {
          out = Object.assign({}, out);
          out[part] = Object.assign({}, trace[part], {color: text});
        }
      });
      return out;
    });
  }

  function plot(el, fig) {
    window.Plotly.newPlot(el, inked(fig.data), themed(fitted(fig.layout, fig.data, el)), config(el));
    drawn.push([el, fig]);
  }
  window.harnessPlot = plot;

  function draw() {
    if (!window.Plotly) return;
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-figure"));
      if (src) plot(el, JSON.parse(src.textContent));
    });
  }

  document.addEventListener("harness:theme", function () {
    drawn.forEach(function (pair) { window.Plotly.react(pair[0], inked(pair[1].data), themed(fitted(pair[1].layout, pair[1].data, pair[0])), config(pair[0])); });
  });

  // plotly.js is 1.4 MB gzipped: the run page fetches it only when a mesh is opened
  function plotlyFrom(src) {
    if (window.Plotly) return Promise.resolve();
    return new Promise(function (resolve, reject) {
      var tag = document.createElement("script");
      tag.src = src;
      tag.onload = resolve;
      tag.onerror = reject;
      document.head.appendChild(tag);
    });
  }

  // run page: a mesh output opens in the arena's viewer (plotly mesh3d of vertices and faces)
  function wireMeshes() {
    document.querySelectorAll("button[data-mesh]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var view = btn.parentNode.querySelector(".mesh-view");
        btn.disabled = true;
        plotlyFrom(btn.getAttribute("data-plotly")).then(function () {
          return fetch(btn.getAttribute("data-mesh"));
        }).then(function (r) { return r.json(); }).then(function (fig) {
          if (fig.error) { view.textContent = fig.error; return; }
          view.hidden = false;
          plot(view, fig);
          btn.hidden = true;
        }).catch(function () { view.textContent = "the mesh could not be loaded"; btn.disabled = false; });
      });
    });
  }

  function start() { draw(); wireMeshes(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
