// Renders every [data-plotly] element from the JSON figure in its attribute. Runs on htmx:load,
// which htmx fires for the initial page and for every swapped-in fragment, so charts inside
// partials render too. Figures are built server-side (dashboard/figures.py); no inline scripts.
(function () {
  "use strict";

  function render(root) {
    if (!window.Plotly) {
      return;
    }
    var nodes = root.querySelectorAll ? root.querySelectorAll("[data-plotly]") : [];
    if (root.matches && root.matches("[data-plotly]")) {
      nodes = [root].concat(Array.prototype.slice.call(nodes));
    }
    Array.prototype.forEach.call(nodes, function (node) {
      var figure;
      try {
        figure = JSON.parse(node.getAttribute("data-plotly"));
      } catch (err) {
        node.textContent = "This chart could not be read.";
        return;
      }
      var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
      window.Plotly.react(node, figure.data || [], figure.layout || {}, config);
      node.setAttribute("data-plotly-rendered", "true");
    });
  }

  document.addEventListener("htmx:load", function (event) {
    render(event.detail.elt);
  });
  // Without htmx (should it fail to load) the page still gets its charts.
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.htmx) {
      render(document);
    }
  });
})();
