// The back and forward buttons on htmx pages (docs/dashboard.md, "History").
//
// 1. A filter form outside the swapped region keeps whatever its inputs held when the page was
//    first rendered: htmx's history snapshot is the page's HTML, not the inputs' live values.
//    After a restore, every form marked `data-history-form` is set from the URL, so the next
//    change sends the filters the table shows. A field the URL does not name goes back to its
//    `data-default` (or empty).
// 2. A snapshot is HTML: whatever a script styled through the DOM (a Plotly chart, Plotly's
//    hidden measuring SVG) comes back as style attributes, which the Content-Security-Policy
//    refuses when the snapshot is put back. While htmx copies the page, rendered charts are
//    taken out and other style attributes set aside, and all is put back at once; a restored
//    page renders its charts again from their `data-plotly` (charts.js, on htmx:load).
(function () {
  "use strict";

  function syncForm(form, params) {
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name || field.type === "submit" || field.type === "button") {
        return;
      }
      var values = params.getAll(field.name);
      var fallback = field.getAttribute("data-default") || "";
      if (field.type === "checkbox" || field.type === "radio") {
        field.checked = values.indexOf(field.value) !== -1;
      } else if (field.multiple) {
        Array.prototype.forEach.call(field.options, function (option) {
          option.selected = values.indexOf(option.value) !== -1;
        });
      } else {
        field.value = values.length ? values[0] : fallback;
      }
    });
  }

  function syncForms() {
    var params = new URLSearchParams(window.location.search);
    document.querySelectorAll("form[data-history-form]").forEach(function (form) {
      syncForm(form, params);
    });
  }

  document.addEventListener("htmx:historyRestore", syncForms);
  // A history miss fetches the page again: its forms are rendered for the URL already, but
  // the browser may fill them back from its own form cache.
  window.addEventListener("pageshow", syncForms);

  document.addEventListener("htmx:beforeHistorySave", function (event) {
    var root = event.detail.historyElt || document.body;
    var taken = [];
    root.querySelectorAll("[data-plotly][data-plotly-rendered]").forEach(function (node) {
      var children = Array.prototype.slice.call(node.childNodes);
      children.forEach(function (child) {
        node.removeChild(child);
      });
      node.removeAttribute("data-plotly-rendered");
      taken.push([node, children]);
    });
    var styled = [];
    root.querySelectorAll("[style]").forEach(function (node) {
      styled.push([node, node.getAttribute("style")]);
      node.removeAttribute("style");
    });
    // htmx copies the page synchronously after this event: everything goes back before the
    // browser paints again.
    queueMicrotask(function () {
      taken.forEach(function (pair) {
        pair[1].forEach(function (child) {
          pair[0].appendChild(child);
        });
        pair[0].setAttribute("data-plotly-rendered", "true");
      });
      // Through the CSSOM, which the policy allows (a style attribute it would refuse).
      styled.forEach(function (pair) {
        pair[0].style.cssText = pair[1];
      });
    });
  });
})();
