// Building the page from data without innerHTML: every string from the API becomes a text node.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A link to the item view of a kref (an item's or a revision's).
export function krefLink(kref, label) {
  return h("a", { href: `#/item?kref=${encodeURIComponent(kref)}`, class: "kref" }, label || kref);
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// A message box for a failed call: "not available" when the appliance has no such route.
export function failure(what, error) {
  if (error && error.missingRoute) {
    return h("div", { class: "notice unavailable", role: "status" },
      h("strong", {}, `${what}: not available`), " — this appliance does not offer it (HTTP ", String(error.status), ").");
  }
  return h("div", { class: "notice error", role: "alert" },
    h("strong", {}, `${what}: `), error && error.message ? error.message : String(error));
}

// Any JSON value as nested definition lists and tables (for answers whose fields vary, such as statistics).
export function valueView(value, depth = 0) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  if (typeof value !== "object") return h("span", {}, String(value));
  if (Array.isArray(value)) {
    if (!value.length) return h("span", { class: "muted" }, "none");
    if (value.every((v) => v === null || typeof v !== "object")) return h("span", {}, value.join(", "));
    return h("ul", { class: "plain" }, value.slice(0, 50).map((v) => h("li", {}, valueView(v, depth + 1))),
      value.length > 50 ? h("li", { class: "muted" }, `… ${value.length - 50} more`) : null);
  }
  const entries = Object.entries(value);
  if (!entries.length) return h("span", { class: "muted" }, "none");
  if (depth > 3) return h("code", {}, JSON.stringify(value).slice(0, 200));
  return h("dl", { class: "kv" }, entries.map(([k, v]) => [h("dt", {}, k), h("dd", {}, valueView(v, depth + 1))]));
}
