// The console's shell: a hash router over the views, focus moved to each new view's heading for keyboard and
// screen-reader users, and the views' clean-up (an open event stream, a running graph) when leaving them.

import { clear, failure } from "./dom.js";
import { dashboardView } from "./views/dashboard.js";
import { graphView } from "./views/graph.js";
import { itemView } from "./views/item.js";
import { liveView } from "./views/live.js";
import { memoriesView } from "./views/memories.js";

const VIEWS = { dashboard: dashboardView, memories: memoriesView, item: itemView, graph: graphView, live: liveView };
const main = document.getElementById("main");
let leave = null;
let generation = 0; // a view that finishes loading after the reader moved on is closed at once

function parseHash() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const [name, query] = raw.split("?");
  return { name: VIEWS[name] ? name : "dashboard", params: new URLSearchParams(query || "") };
}

async function route() {
  if (leave) { try { leave(); } catch { /* a view's clean-up never blocks the next view */ } leave = null; }
  const { name, params } = parseHash();
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === (name === "item" ? "memories" : name)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  clear(main);
  document.body.dataset.view = name;
  const mine = ++generation;
  const section = document.createElement("div");
  section.className = `view view-${name}`;
  main.append(section);
  let left = null;
  try {
    left = (await VIEWS[name](section, params)) || null;
  } catch (error) {
    section.append(failure("This view", error));
  }
  if (mine !== generation) { if (left) left(); return; }
  leave = left;
  const heading = main.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
    document.title = `${heading.textContent} · kumiho-ce`;
  }
}

window.addEventListener("hashchange", route);
route();
