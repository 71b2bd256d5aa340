// The review queue from the keyboard (docs/dashboard.md): j / k move to the next and previous
// item, Enter goes to the item's first action, o opens its rule. Keys typed into a field are
// the field's. After an action the resolved item keeps the focus, so j goes on to the next.
(function () {
  "use strict";

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-review-card]"));
  }

  function current() {
    var active = document.activeElement;
    return active && active.closest ? active.closest("[data-review-card]") : null;
  }

  function move(step) {
    var all = cards();
    if (!all.length) {
      return;
    }
    var index = all.indexOf(current());
    var next = all[Math.min(Math.max(index + step, 0), all.length - 1)];
    if (index === -1) {
      next = all[0];
    }
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }

  function typing(target) {
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) {
      return;
    }
    var card = current();
    if (event.key === "j") {
      move(1);
    } else if (event.key === "k") {
      move(-1);
    } else if (event.key === "Enter" && card && event.target === card) {
      var first = card.querySelector(
        ".review-actions input:not([type=hidden]), .review-actions button"
      );
      if (first) {
        first.focus();
        event.preventDefault();
      }
    } else if (event.key === "o" && card) {
      var link = card.querySelector("[data-review-open]");
      if (link) {
        window.location.href = link.href;
      }
    } else {
      return;
    }
  });

  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail.elt;
    if (elt.matches && elt.matches("[data-review-card].resolved")) {
      elt.focus();
    }
  });
})();
