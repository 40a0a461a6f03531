// Health, counts, index lag, the model and the background jobs (a queued or running one can be cancelled);
// refreshed 5 s after the previous refresh finished, and not while the tab is hidden.

import { api, apiFirst } from "../api.js";
import { clear, failure, h, valueView, when } from "../dom.js";

const REFRESH_MS = 5000;

function badge(status) {
  const ok = status === "ok" || status === "ready";
  return h("span", { class: `badge ${ok ? "ok" : "bad"}` }, status || "unknown");
}

function card(title, id) {
  const body = h("div", { class: "card-body" }, h("p", { class: "muted" }, "Loading…"));
  return [h("section", { class: "card", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), body), body];
}

async function fill(body, what, load, render) {
  try {
    const data = await load();
    clear(body).append(render(data));
  } catch (error) {
    clear(body).append(failure(what, error));
  }
}

function health(data) {
  const parts = [["Graph store", data.neo4j], ["Event feed", data.event_stream], ["Embedding", data.embedding]];
  return h("div", {},
    h("p", {}, "Overall: ", badge(data.status), " · version ", String(data.version ?? "?")),
    h("dl", { class: "kv" }, parts.map(([label, part]) => [
      h("dt", {}, label),
      h("dd", {}, part ? badge(part.status) : badge(undefined), part && part.model ? ` ${part.model}` : "",
        part && part.detail ? h("span", { class: "muted" }, ` ${part.detail}`) : ""),
    ])));
}

function ready(data) {
  const search = data.search || {};
  return h("dl", { class: "kv" },
    h("dt", {}, "State"), h("dd", {}, badge(data.status)),
    h("dt", {}, "Index rows"), h("dd", {}, String(search.rows ?? "—")),
    h("dt", {}, "Index lag (writes not yet indexed)"), h("dd", { "data-testid": "index-lag" }, String(search.pending ?? "—")),
    h("dt", {}, "Embedder"), h("dd", {}, String(search.embedder ?? "—")),
    search.sync_error ? [h("dt", {}, "Index error"), h("dd", {}, String(search.sync_error))] : null);
}

function bytes(n) {
  if (typeof n !== "number") return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function countTable(caption, rows, key) {
  if (!Array.isArray(rows) || !rows.length) return null;
  return h("table", { class: "compact" }, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, [key.replace("_", " "), "items", "deprecated"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.slice(0, 15).map((row) => h("tr", {},
      h("td", {}, [row.project !== row[key] && key !== "project" ? row.project : null, row[key]].filter(Boolean).join(" · ")),
      h("td", {}, String(row.items ?? "")), h("td", {}, String(row.deprecated_items ?? ""))))));
}

// GET /api/v1/stats: totals, the index's lag, disk use, and counts per project, kind and memory type. Unknown
// fields (a newer appliance) still show, as a list.
function stats(data) {
  const known = new Set(["totals", "index", "disk", "projects", "projects_truncated", "spaces", "spaces_truncated", "kinds",
    "kinds_truncated", "memory_types", "memory_types_truncated"]);
  const rest = Object.fromEntries(Object.entries(data).filter(([k]) => !known.has(k)));
  const index = data.index || {};
  const disk = data.disk || {};
  return h("div", { class: "stats" },
    data.totals ? h("dl", { class: "kv totals" }, Object.entries(data.totals).map(([k, v]) => [
      h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, String(v))])) : null,
    data.index ? h("p", {}, "Index: ", badge(index.state), ` ${index.pending_rows ?? 0} writes waiting`,
      index.seconds_behind ? `, ${index.seconds_behind} s behind` : "", index.sync_error ? ` — ${index.sync_error}` : "") : null,
    data.disk ? h("p", {}, `Disk: ${bytes(disk.total_bytes)} (graph ${bytes(disk.graph_bytes)}, index ${bytes(disk.index_bytes)}, `
      + `artifacts ${bytes(disk.artifacts_bytes)})`) : null,
    h("div", { class: "count-tables" }, countTable("Projects", data.projects, "project"),
      countTable("Kinds", data.kinds, "kind"), countTable("Memory types", data.memory_types, "memory_type"),
      countTable("Spaces", data.spaces, "space")),
    Object.keys(rest).length ? valueView(rest) : null);
}

function model(data) {
  const chat = data.chat || {};
  return h("div", {},
    h("p", {}, "Chat model: ", badge(chat.available ? "ok" : chat.state), chat.model_id ? ` ${chat.model_id}` : ""),
    chat.reason ? h("p", { class: "muted" }, String(chat.reason)) : null,
    h("dl", { class: "kv" },
      h("dt", {}, "Calls"), h("dd", {}, String(chat.calls ?? "—")),
      h("dt", {}, "Next Dream State"), h("dd", {}, when(data.next_dream_state) || "—"),
      h("dt", {}, "Idle consolidation"), h("dd", {}, data.idle_consolidation_minutes != null
        ? `after ${data.idle_consolidation_minutes} min` : "—")));
}

// `cancel(job, button)` is called when a queued or running job's Cancel button is pressed.
function jobs(data, cancel) {
  const list = Array.isArray(data) ? data : data.jobs || [];
  if (!list.length) return h("p", { class: "muted" }, "No background jobs.");
  return h("table", {},
    h("thead", {}, h("tr", {}, ["Job", "Kind", "State", "Progress", "Started", ""].map(
      (c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, list.slice(0, 20).map((job) => {
      const progress = job.progress || {};
      const total = Number(progress.total) || 0;
      const done = Number(progress.done) || 0;
      const id = job.job_id || job.id || "";
      const active = id && (job.state === "running" || job.state === "queued");
      let button = null;
      if (active) {
        button = h("button", { type: "button", class: "danger", "data-job-id": id,
          "aria-label": `Cancel ${job.description || id}` }, "Cancel");
        button.addEventListener("click", () => cancel(job, button));
      }
      return h("tr", {},
        h("td", {}, job.description || id),
        h("td", {}, job.kind || ""),
        h("td", {}, job.state || ""),
        h("td", {}, total ? h("progress", { max: total, value: done, "aria-label": `${done} of ${total}` }) : "",
          total ? ` ${done}/${total}` : ""),
        h("td", {}, when(job.started_at || job.created_at)),
        h("td", {}, button));
    })));
}

export async function dashboardView(root) {
  const [healthCard, healthBody] = card("Health", "health");
  const [readyCard, readyBody] = card("Index", "index");
  const [statsCard, statsBody] = card("Counts", "stats");
  const [modelCard, modelBody] = card("Model", "model");
  const [jobsCard, jobsBody] = card("Background jobs", "jobs");
  // outside the jobs table, so that the answer to a cancel outlives the table's next refresh
  const jobsStatus = h("div", { class: "action-status", id: "jobs-status", role: "status" });
  jobsCard.append(jobsStatus);
  root.append(h("h1", {}, "Dashboard"),
    h("div", { class: "grid" }, healthCard, readyCard, modelCard, statsCard, jobsCard));

  const loadJobs = () => fill(jobsBody, "Jobs", () => apiFirst(["/api/v1/jobs", "/api/jobs"]),
    (data) => jobs(data, cancel));
  async function cancel(job, button) {
    const id = job.job_id || job.id;
    button.disabled = true;
    clear(jobsStatus);
    try {
      // a JSON body: the appliance refuses the form and plain-text types any other page could send
      await api(`/api/v1/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST", body: {} });
      jobsStatus.textContent = `Asked “${job.description || id}” to stop.`;
    } catch (error) {
      button.disabled = false;
      jobsStatus.append(failure(`Cancel ${job.description || id}`, error));
      return;
    }
    await loadJobs();
  }

  const refresh = () => Promise.all([
    fill(healthBody, "Health", () => api("/api/_health"), health),
    fill(readyBody, "Index", () => api("/api/_ready"), ready),
    fill(statsBody, "Counts", () => api("/api/v1/stats"), stats),
    fill(modelBody, "Model", () => apiFirst(["/api/v1/model", "/api/model"]), model),
    loadJobs(),
  ]);
  // the next refresh is planned once this one has finished: a slow appliance never gets a queue of them
  let stopped = false;
  let timer = null;
  const later = () => { if (!stopped) timer = window.setTimeout(tick, REFRESH_MS); };
  async function tick() {
    if (!document.hidden) await refresh(); // a hidden tab asks nothing
    later();
  }
  await refresh();
  later();
  return () => { stopped = true; window.clearTimeout(timer); };
}
