// Accessibility mends for markup that Dash's own components render and our Python code cannot
// reach (issue 28: the page passes axe-core's WCAG 2.1 A/AA rules; tests/test_browser.py
// test_every_section_passes_axe_wcag21_aa). Each mend names the Dash behaviour it works
// around; none hides anything from assistive technology. They run after every change of the
// page (Dash renders components late and again) and write only attributes that differ, so
// they settle at once.
(function () {
  // by the attribute: an element without one reads tabIndex -1 and yet takes no focus
  function setTabIndex(element, index) {
    if (element.getAttribute("tabindex") !== String(index)) { element.setAttribute("tabindex", String(index)); }
  }

  // dcc.Dropdown (Dash 4, src/fragments/Dropdown.tsx): the trigger <button> has tabindex=-1
  // and a read-only <input class="dash-dropdown-focus-target" aria-hidden="true" tabindex=0>
  // before it takes Tab and hands focus on to the button (plotly/dash#3740, for Safari's
  // default of not tabbing to buttons; the button's blur sets the input's tabindex back to
  // 0). A focusable element hidden from assistive technology fails axe's aria-hidden-focus.
  // The button itself is the Tab stop here: Chrome, Firefox and Edge tab to it; Safari, as
  // for every other button of the page, with "Keyboard navigation" on.
  // The button is also named by its value only (aria-labelledby: its value spans), which
  // hides the <label for=its id> from screen readers: the label is put first.
  function mendDropdowns(root) {
    root.querySelectorAll(".dash-dropdown-focus-target").forEach(function (proxy) {
      setTabIndex(proxy, -1);
    });
    root.querySelectorAll("button.dash-dropdown").forEach(function (button) {
      setTabIndex(button, 0);
      if (!button.id) { return; }
      var label = findLabel(button);
      if (!label) { return; }
      if (!label.id) { label.id = button.id + "--label"; }
      var names = (button.getAttribute("aria-labelledby") || "").split(" ").filter(Boolean);
      if (names[0] !== label.id) {
        button.setAttribute("aria-labelledby", [label.id].concat(names.filter(function (n) { return n !== label.id; })).join(" "));
      }
    });
  }

  function findLabel(control) {
    var labels = control.labels;
    if (labels && labels.length) { return labels[0]; }
    return null;
  }

  // dcc.Checklist and dcc.RadioItems (Dash 4, src/utils/optionRendering.tsx, plotly/dash#3453)
  // render role="listbox" around <label role="option" aria-selected> elements that each hold
  // a native checkbox or radio button: an option with a focusable control inside
  // (nested-interactive) in a listbox with no name (aria-input-field-name), and the native
  // control's own checked state announced twice. The native inputs with their labels are the
  // accessible form: the container becomes a group (radiogroup for radio buttons; a
  // <fieldset> around it names it) and the options plain labels.
  function mendOptionLists(root) {
    root.querySelectorAll(".dash-options-list.dash-checklist, .dash-options-list.dash-radioitems").forEach(function (list) {
      var role = list.classList.contains("dash-radioitems") ? "radiogroup" : "group";
      if (list.getAttribute("role") !== role) { list.setAttribute("role", role); }
      list.querySelectorAll(".dash-options-list-option[role]").forEach(function (option) {
        option.removeAttribute("role");
        option.removeAttribute("aria-selected");
      });
    });
  }

  // dash_table.DataTable (src/dash-table/components/PageNavigation): the page buttons hold
  // only an icon, so they have no name (button-name).
  var PAGE_BUTTONS = { "first-page": "First page", "previous-page": "Previous page", "next-page": "Next page", "last-page": "Last page" };

  function mendTablePaging(root) {
    root.querySelectorAll(".previous-next-container button").forEach(function (button) {
      for (var cls in PAGE_BUTTONS) {
        if (button.classList.contains(cls) && button.getAttribute("aria-label") !== PAGE_BUTTONS[cls]) {
          button.setAttribute("aria-label", PAGE_BUTTONS[cls]);
          button.title = PAGE_BUTTONS[cls];
        }
      }
    });
    root.querySelectorAll("input.current-page").forEach(function (input) {
      if (!input.hasAttribute("aria-label")) { input.setAttribute("aria-label", "Page number"); }
    });
  }

  // The what-if form (dashboard/views/whatif.py) writes each field's <label> without `for`:
  // its inputs have pattern-matching ids, whose DOM id is Dash's JSON of the dict (keys
  // sorted, no spaces: json.dumps(field_id, sort_keys=True, separators=(",", ":"))). Until
  // that view passes it as htmlFor, the label is tied here to the one control of its field.
  function mendWhatIfLabels(root) {
    root.querySelectorAll(".whatif-field > label:not([for])").forEach(function (label) {
      var control = label.parentElement.querySelector("input:not(.dash-dropdown-focus-target), button.dash-dropdown");
      if (control && control.id) { label.htmlFor = control.id; }
    });
  }

  // dcc.Tabs (Dash 4, src/components/Tabs.tsx): each tab is a <div> with a click handler only,
  // so the keyboard cannot reach or open a section (WCAG 2.1.1) and a screen reader hears
  // plain text. The WAI-ARIA tabs pattern: a tablist of tabs, the selected one in the Tab
  // order and marked, the others reached with the arrow keys (Home, End) and opened with
  // Enter or Space (manual activation: opening a section draws its views); the content is
  // the tabpanel of the selected tab.
  function mendTabs(root) {
    root.querySelectorAll(".tab-container").forEach(function (list) {
      if (list.getAttribute("role") !== "tablist") { list.setAttribute("role", "tablist"); }
      if (!list.hasAttribute("aria-label")) { list.setAttribute("aria-label", "Sections"); }
      var content = list.parentElement && list.parentElement.querySelector(":scope > .tab-content");
      var selected = list.querySelector(":scope > .tab--selected");
      var active = document.activeElement;
      // the one Tab stop of the list: the tab with focus, else the selected one
      var stop = active && active.parentElement === list && active.classList.contains("tab") ? active : selected;
      list.querySelectorAll(":scope > .tab").forEach(function (tab) {
        var on = tab === selected;
        if (tab.getAttribute("role") !== "tab") { tab.setAttribute("role", "tab"); }
        if (tab.getAttribute("aria-selected") !== String(on)) { tab.setAttribute("aria-selected", String(on)); }
        var disabled = tab.classList.contains("tab--disabled");
        if (disabled && tab.getAttribute("aria-disabled") !== "true") { tab.setAttribute("aria-disabled", "true"); }
        setTabIndex(tab, tab === stop ? 0 : -1);
        if (content && list.id && tab.getAttribute("aria-controls") !== list.id + "--panel") {
          tab.setAttribute("aria-controls", list.id + "--panel");
        }
      });
      if (content && list.id) {
        if (content.id !== list.id + "--panel") { content.id = list.id + "--panel"; }
        if (content.getAttribute("role") !== "tabpanel") { content.setAttribute("role", "tabpanel"); }
        if (selected && selected.id && content.getAttribute("aria-labelledby") !== selected.id) {
          content.setAttribute("aria-labelledby", selected.id);
        }
      }
    });
  }

  document.addEventListener("keydown", function (event) {
    var tab = event.target instanceof Element ? event.target.closest(".tab-container > [role=tab]") : null;
    if (!tab) { return; }
    var tabs = Array.from(tab.parentElement.querySelectorAll(":scope > [role=tab]:not([aria-disabled=true])"));
    var at = tabs.indexOf(tab);
    var next = null;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") { next = tabs[(at + 1) % tabs.length]; }
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") { next = tabs[(at - 1 + tabs.length) % tabs.length]; }
    else if (event.key === "Home") { next = tabs[0]; }
    else if (event.key === "End") { next = tabs[tabs.length - 1]; }
    else if (event.key === "Enter" || event.key === " ") { event.preventDefault(); tab.click(); return; }
    if (!next) { return; }
    event.preventDefault();
    next.focus();  // focusin mends the Tab stop
  });

  function mend() {
    var root = document.body;
    if (!root) { return; }
    mendTabs(root);
    mendWhatIfLabels(root);
    mendDropdowns(root);
    mendOptionLists(root);
    mendTablePaging(root);
  }

  function start() {
    mend();
    // once per batch of changes, before the browser paints them (a mutation observer's
    // callback runs as a microtask): no frame ever shows or announces the unmended markup
    new MutationObserver(mend).observe(document.body, {
      subtree: true, childList: true, attributes: true, attributeFilter: ["tabindex", "role", "for", "class"],
    });
    document.addEventListener("focusin", mend);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
