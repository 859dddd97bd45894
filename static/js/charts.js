// The one way a figure reaches a page: the view puts a plotly figure dict in the context and the
// template writes
//   <div id="X" class="chart" data-figure="X-fig"></div>{{ fig|json_script:"X-fig" }}
// (Django's json_script escapes <, > and & so figure text cannot leave the script element).
// This file draws every [data-figure] element from the JSON script it names; figures are built
// server-side (portal/charts/), this file only draws.
(function () {
  "use strict";

  function draw(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source) return;
    var fig;
    try {
      fig = JSON.parse(source.textContent);
    } catch (err) {
      console.error("data-figure: bad JSON in #" + el.dataset.figure, err);
      return;
    }
    Plotly.react(el, fig.data || [], fig.layout || {}, { displayModeBar: false, responsive: true });
  }

  function render(root) {
    if (typeof Plotly === "undefined") return;
    root = root || document;
    if (root.matches && root.matches("[data-figure]")) draw(root);
    root.querySelectorAll("[data-figure]").forEach(draw);
  }

  // htmx.onLoad runs for the page once loaded and again for every element htmx swaps in, so a
  // figure inside a refreshed partial is drawn after the swap. Without htmx, draw once on load.
  if (typeof htmx !== "undefined") {
    htmx.onLoad(render);
  } else {
    document.addEventListener("DOMContentLoaded", function () { render(document); });
  }
  window.headroomCharts = { render: render };
})();
