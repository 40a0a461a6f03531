// The memory graph (GET /api/v1/graph) drawn by the vendored force-graph library on a canvas. It stays responsive
// at 10k nodes: the appliance samples past its limit, the page draws at most RENDER_CAP nodes, large graphs are
// drawn as plain dots without arrows or dragging, and the simulation stops after a bounded number of ticks (or
// seconds), after which the canvas redraws only when the view moves.

import { api } from "../api.js";
import { clear, failure, h, krefLink, when } from "../dom.js";

const RENDER_CAP = 10000; // memories drawn at most: the API's own maximum
const SPACE_CAP = 1000;
const LARGE = 3000; // from here on: dots, no arrows, no dragging, a faster cooling simulation
const LIBRARY = "/ui/vendor/force-graph/force-graph.min.js";
const STRUCTURE = new Set(["BELONGS_TO", "CHILD_OF"]); // item → space, space → parent: laid out, not drawn when large
const PALETTE = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#be185d", "#4d7c0f", "#92400e"];

let loading = null;

function loadLibrary() {
  if (window.ForceGraph) return Promise.resolve(window.ForceGraph);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = LIBRARY;
      script.onload = () => resolve(window.ForceGraph);
      script.onerror = () => { loading = null; reject(new Error("the graph library could not be loaded")); };
      document.head.append(script);
    });
  }
  return loading;
}

function colourOf(kind, colours) {
  if (!colours.has(kind)) colours.set(kind, kind === "space" ? "#6b7280" : PALETTE[colours.size % PALETTE.length]);
  return colours.get(kind);
}

function nodeKref(node) {
  if (!node || node.kind === "space") return null;
  return node.id.startsWith("kref://") ? node.id : `kref://${node.id}`;
}

export async function graphView(root, params) {
  const field = (id, label, input) => h("div", { class: "field" }, h("label", { for: id }, label), input);
  const project = h("input", { id: "graph-project", value: params.get("project") || "", maxlength: 200 });
  const space = h("input", { id: "graph-space", value: params.get("space") || "", maxlength: 500 });
  const kind = h("input", { id: "graph-kind", value: params.get("kind") || "", maxlength: 100 });
  const limit = h("input", { id: "graph-limit", type: "number", min: 1, max: RENDER_CAP, step: 1,
    value: params.get("limit") || 2000 });
  const form = h("form", { class: "filter-form", "aria-label": "Graph filters" },
    field("graph-project", "Project", project), field("graph-space", "Space", space), field("graph-kind", "Kind", kind),
    field("graph-limit", `Nodes (max ${RENDER_CAP})`, limit),
    h("div", { class: "field" }, h("button", { type: "submit", class: "primary" }, "Draw")));
  const find = h("input", { id: "graph-find", type: "search", maxlength: 200, placeholder: "a memory's name" });
  const findForm = h("form", { class: "inline-form", role: "search", "aria-label": "Find a node" },
    h("label", { for: "graph-find" }, "Find in graph"), find, h("button", { type: "submit" }, "Find"));
  const summary = h("div", { role: "status", id: "graph-summary" }, "Loading the graph…");
  const canvasBox = h("div", { id: "graph-canvas", class: "graph-canvas", dataset: { engine: "idle" } });
  const details = h("aside", { class: "graph-details", "aria-label": "Selected node", "aria-live": "polite" },
    h("p", { class: "muted" }, "Point at or click a node, or find one by name."));
  const legend = h("ul", { class: "legend", "aria-label": "Colours by kind" });
  root.append(h("h1", {}, "Memory graph"), form,
    h("div", { class: "graph-layout" }, h("div", {}, h("div", { class: "graph-bar" }, findForm, summary), canvasBox),
      h("div", { class: "graph-side" }, legend, details)));

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const search = new URLSearchParams();
    for (const [key, input] of [["project", project], ["space", space], ["kind", kind], ["limit", limit]]) {
      if (input.value.trim()) search.set(key, input.value.trim());
    }
    window.location.hash = `#/graph?${search}`;
  });

  let graph = null;
  const leave = () => {
    if (graph) { graph.pauseAnimation(); if (graph._destructor) graph._destructor(); graph = null; }
  };

  let data;
  const wanted = Math.min(RENDER_CAP, Math.max(1, Number(limit.value) || 2000));
  try {
    data = await api("/api/v1/graph", { query: {
      project: project.value.trim() || undefined, space: space.value.trim() || undefined,
      kind: kind.value.trim() || undefined, limit: wanted } });
  } catch (error) {
    clear(summary).append(failure("The memory graph", error));
    return leave;
  }
  let ForceGraph;
  try {
    ForceGraph = await loadLibrary();
  } catch (error) {
    clear(summary).append(failure("The graph view", error));
    return leave;
  }

  // at most RENDER_CAP memories (and the spaces they sit in, up to SPACE_CAP), whatever the appliance sent
  const all = data.nodes || [];
  const spaces = all.filter((n) => n.kind === "space").slice(0, SPACE_CAP);
  const memories = all.filter((n) => n.kind !== "space").slice(0, RENDER_CAP);
  const nodes = [...spaces, ...memories].map((n) => ({ ...n }));
  const ids = new Set(nodes.map((n) => n.id));
  const links = (data.edges || []).filter((e) => ids.has(e.source) && ids.has(e.target) && e.source !== e.target)
    .map((e) => ({ source: e.source, target: e.target, edge_type: e.edge_type }));
  const large = nodes.length >= LARGE;
  const colours = new Map();
  const dropped = all.length - nodes.length;
  const sampled = data.truncated
    ? ` of ${data.total_nodes} (the appliance chose them: ${(data.sampling && data.sampling.method || "sampled").replace(/_/g, " ")})`
    : "";
  summary.textContent = `${memories.length} memories${sampled}, ${spaces.length} spaces and ${links.length} links drawn`
    + (dropped > 0 ? `; ${dropped} more not drawn (the console draws at most ${RENDER_CAP}).` : ".");
  canvasBox.dataset.memories = String(memories.length);
  canvasBox.dataset.nodes = String(nodes.length);
  canvasBox.dataset.links = String(links.length);

  const show = (node, pinned) => {
    clear(details);
    if (!node) { details.append(h("p", { class: "muted" }, "Point at or click a node, or find one by name.")); return; }
    const kref = nodeKref(node);
    details.append(h("h2", {}, node.title || node.name || node.id),
      h("p", { class: "muted small" }, [node.kind, node.space, when(node.created_at)].filter(Boolean).join(" · ")),
      node.summary ? h("p", {}, node.summary) : null,
      kref ? h("p", {}, krefLink(kref, "Open this memory")) : null,
      pinned ? null : h("p", { class: "muted small" }, "Click to keep it here."));
  };

  let ticks = 0;
  let pinned = null;
  const started = performance.now();
  const width = () => Math.max(300, canvasBox.clientWidth);
  graph = ForceGraph()(canvasBox)
    .width(width())
    .height(canvasBox.clientHeight || 520)
    .graphData({ nodes, links })
    .nodeId("id")
    .nodeLabel(() => "") // the library's tooltip takes HTML; the details panel shows text instead
    .nodeColor((n) => colourOf(n.kind, colours))
    .nodeRelSize(large ? 2 : 4)
    .nodeVal((n) => (n.kind === "space" ? 3 : 1))
    .linkColor(() => (large ? "rgba(100,116,139,0.15)" : "rgba(100,116,139,0.45)"))
    .linkVisibility((l) => !large || !STRUCTURE.has(l.edge_type))
    .linkDirectionalArrowLength(large ? 0 : 3)
    .linkDirectionalArrowRelPos(1)
    .enableNodeDrag(!large)
    // pointing at a node paints a hidden canvas of every node and link on each frame: for a large graph that
    // doubles the cost of each tick, so it waits until the layout has stopped
    .enablePointerInteraction(!large)
    .autoPauseRedraw(true)
    .d3AlphaDecay(large ? 0.06 : 0.0228)
    .d3VelocityDecay(large ? 0.5 : 0.4)
    .warmupTicks(0)
    .cooldownTicks(large ? 120 : 300) // the simulation stops after this many ticks…
    .cooldownTime(large ? 8000 : 15000) // …or this many milliseconds, whichever comes first
    .onEngineTick(() => { ticks += 1; })
    .onEngineStop(() => {
      if (graph) {
        if (large) graph.enablePointerInteraction(true);
        graph.zoomToFit(300, 20);
      }
      canvasBox.dataset.engine = "stopped";
      canvasBox.dataset.ticks = String(ticks);
      canvasBox.dataset.layoutMs = String(Math.round(performance.now() - started));
    })
    .onNodeHover((node) => { canvasBox.style.cursor = node ? "pointer" : ""; if (!pinned) show(node, false); })
    .onNodeClick((node) => { pinned = node; show(node, true); })
    .onBackgroundClick(() => { pinned = null; show(null); });
  if (large) {
    graph.d3Force("charge").theta(1.5).distanceMax(300); // a coarser many-body estimate: cheaper ticks
    graph.nodeCanvasObject((node, ctx) => {
      ctx.fillStyle = colourOf(node.kind, colours);
      ctx.fillRect(node.x - 1.5, node.y - 1.5, 3, 3);
    }).nodePointerAreaPaint((node, color, ctx) => {
      ctx.fillStyle = color;
      ctx.fillRect(node.x - 3, node.y - 3, 6, 6);
    });
  }
  canvasBox.dataset.engine = "running";
  const kinds = [...new Set(nodes.map((n) => n.kind))].slice(0, 12);
  for (const k of kinds) legend.append(h("li", {}, h("span", { class: "swatch", dataset: { kind: k } }), k));
  for (const swatch of legend.querySelectorAll(".swatch")) swatch.style.background = colourOf(swatch.dataset.kind, colours);

  findForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const wantedName = find.value.trim().toLowerCase();
    if (!wantedName || !graph) return;
    const node = nodes.find((n) => (n.name || "").toLowerCase().includes(wantedName)
      || (n.title || "").toLowerCase().includes(wantedName));
    if (!node) { clear(details).append(h("p", {}, `No node named “${find.value.trim()}” in this drawing.`)); return; }
    pinned = node;
    show(node, true);
    if (node.x !== undefined) { graph.centerAt(node.x, node.y, 400); graph.zoom(4, 400); }
    const link = details.querySelector("a");
    if (link) link.focus();
  });
  const onResize = () => { if (graph) graph.width(width()); };
  window.addEventListener("resize", onResize);
  return () => { window.removeEventListener("resize", onResize); leave(); };
}
