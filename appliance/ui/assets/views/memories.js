// The memory browser: search (GET /api/v1/search) or browse (Kumiho's GET /api/v1/items), filtered by project,
// space and kind (GET /api/v1/projects, /spaces). The filters live in the URL, so Back returns to the same list.

import { api } from "../api.js";
import { clear, failure, h, krefLink, when } from "../dom.js";

const PAGE = 50;

function listOf(data, ...keys) {
  if (Array.isArray(data)) return data;
  for (const key of keys) if (data && Array.isArray(data[key])) return data[key];
  return [];
}

function projectName(project) {
  return typeof project === "string" ? project : project.name || project.project_id;
}

function spacePath(space) {
  return typeof space === "string" ? space : space.path;
}

function select(id, label, options, value, emptyLabel) {
  const el = h("select", { id, name: id.replace("filter-", "") },
    h("option", { value: "" }, emptyLabel),
    options.map((o) => h("option", { value: o, selected: o === value }, o)));
  return [h("label", { for: id }, label), el];
}

function resultRow(hit) {
  const kref = hit.item_kref || hit.kref || hit.revision_kref;
  const title = hit.title || hit.name || hit.item_name || kref;
  return h("li", { class: "result" },
    h("div", {}, krefLink(kref, title), hit.deprecated ? h("span", { class: "badge bad" }, "deprecated") : null,
      hit.score !== undefined ? h("span", { class: "muted score" }, ` score ${hit.score}`) : null),
    h("div", { class: "muted small" }, [hit.kind, hit.space, when(hit.created_at)].filter(Boolean).join(" · ")),
    hit.summary ? h("p", { class: "summary" }, hit.summary) : null);
}

export async function memoriesView(root, params) {
  const state = {
    q: params.get("q") || "", project: params.get("project") || "", space: params.get("space") || "",
    kind: params.get("kind") || "", deprecated: params.get("deprecated") === "1",
    offset: Math.max(0, Number(params.get("offset")) || 0),
  };
  const filters = h("div", { class: "filters" });
  const results = h("div", { class: "results", "aria-live": "polite", "aria-busy": "true" });
  root.append(h("h1", {}, "Memories"), filters, results);

  let projects = [];
  let spaces = [];
  const problems = [];
  try {
    projects = listOf(await api("/api/v1/projects"), "projects").map(projectName).filter(Boolean);
  } catch (error) {
    problems.push(failure("Project list", error));
  }
  if (state.project) {
    try {
      spaces = listOf(await api("/api/v1/spaces", { query: { parent_path: `/${state.project}`, recursive: true } }),
        "spaces").map(spacePath).filter(Boolean);
    } catch (error) {
      problems.push(failure("Space list", error));
    }
  }

  const query = h("input", { id: "filter-q", name: "q", type: "search", value: state.q, maxlength: 2000,
    placeholder: "words, a name, a question…" });
  const kind = h("input", { id: "filter-kind", name: "kind", value: state.kind, maxlength: 100, list: "known-kinds" });
  const deprecated = h("input", { id: "filter-deprecated", type: "checkbox", checked: state.deprecated });
  const [projectLabel, projectSelect] = select("filter-project", "Project", projects, state.project, "all projects");
  const [spaceLabel, spaceSelect] = select("filter-space", "Space", spaces, state.space,
    state.project ? "the whole project" : "choose a project first");
  spaceSelect.disabled = !state.project;
  const form = h("form", { role: "search", class: "filter-form" },
    h("div", { class: "field wide" }, h("label", { for: "filter-q" }, "Search"), query),
    h("div", { class: "field" }, projectLabel, projectSelect),
    h("div", { class: "field" }, spaceLabel, spaceSelect),
    h("div", { class: "field" }, h("label", { for: "filter-kind" }, "Kind"), kind,
      h("datalist", { id: "known-kinds" }, ["conversation", "decision", "fact", "preference", "summary", "code"]
        .map((k) => h("option", { value: k })))),
    h("div", { class: "field check" }, deprecated, h("label", { for: "filter-deprecated" }, "include deprecated")),
    h("div", { class: "field" }, h("button", { type: "submit", class: "primary" }, "Search")));
  filters.append(form, ...problems);

  const go = (changes) => {
    const next = { ...state, ...changes };
    const search = new URLSearchParams();
    for (const key of ["q", "project", "space", "kind"]) if (next[key]) search.set(key, next[key]);
    if (next.deprecated) search.set("deprecated", "1");
    if (next.offset) search.set("offset", String(next.offset));
    window.location.hash = `#/memories?${search}`;
  };
  projectSelect.addEventListener("change", () => go({ project: projectSelect.value, space: "", offset: 0 }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go({ q: query.value.trim(), space: spaceSelect.value, kind: kind.value.trim(), deprecated: deprecated.checked,
      offset: 0 });
  });

  const finish = () => results.setAttribute("aria-busy", "false");
  try {
    if (state.q) {
      const found = await api("/api/v1/search", { query: {
        q: state.q, limit: 50, project: state.project || undefined, space: state.space || undefined,
        kind: state.kind || undefined, include_deprecated: state.deprecated || undefined } });
      const hits = listOf(found, "results");
      results.append(h("p", { role: "status" }, `${hits.length} result${hits.length === 1 ? "" : "s"} for “${state.q}”`),
        h("ol", { class: "result-list" }, hits.map(resultRow)));
    } else {
      const spacePathQuery = state.space ? `/${state.space.replace(/^\//, "")}` : state.project ? `/${state.project}` : undefined;
      if (!spacePathQuery) {
        results.append(h("p", { class: "muted" }, "Type a search, or choose a project to browse its memories."));
      } else {
        const page = await api("/api/v1/items", { query: {
          space_path: spacePathQuery, kind_filter: state.kind || undefined,
          include_deprecated: state.deprecated || undefined, limit: PAGE, offset: state.offset || undefined } });
        const items = listOf(page, "items");
        if (!state.space && !state.offset && spaces.length) { // a project's memories live in its spaces
          results.append(h("h2", {}, "Spaces"), h("ul", { class: "space-list" }, spaces.map((path) => h("li", {},
            h("a", { href: `#/memories?${new URLSearchParams({ project: state.project, space: path })}` }, path)))));
          if (!items.length) return finish();
        }
        results.append(h("p", { role: "status" }, items.length
          ? `Memories ${state.offset + 1}–${state.offset + items.length} in ${spacePathQuery}` : `No memories in ${spacePathQuery}`),
        h("ol", { class: "result-list" }, items.map((item) => resultRow({ ...item, title: item.item_name || item.name }))),
        h("div", { class: "pager" },
          state.offset ? h("button", { type: "button", onclick: () => go({ offset: Math.max(0, state.offset - PAGE) }) }, "Previous page") : null,
          items.length === PAGE ? h("button", { type: "button", onclick: () => go({ offset: state.offset + PAGE }) }, "Next page") : null));
      }
    }
  } catch (error) {
    results.append(failure(state.q ? "Search" : "Item list", error));
  }
  finish();
}
