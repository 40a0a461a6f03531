// One memory (GET /api/v1/inspect?kref=): its revisions, tags, artifact text (Markdown, rendered as DOM nodes),
// provenance (DERIVED_FROM chains, supersession, contested edges), and deprecate/restore after a confirmation.

import { api } from "../api.js";
import { clear, failure, h, krefLink, valueView, when } from "../dom.js";
import { renderMarkdown } from "../markdown.js";

// A stored text as Markdown; should the renderer fail on some text, the text itself, as plain text, rather than a
// broken page.
function markdownOrPlain(text) {
  try {
    return renderMarkdown(text);
  } catch (error) {
    console.warn("kumiho-ce console: this text is shown unformatted", error);
    return h("pre", { class: "plain-text" }, text);
  }
}

function section(title, id, ...body) {
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), ...body);
}

// A chain entry may be a kref or {kref, title, …}.
function refEntry(entry) {
  if (typeof entry === "string") return h("li", {}, krefLink(entry));
  const kref = entry.kref || entry.revision_kref || entry.item_kref || entry.target_kref || entry.source_kref;
  const label = entry.title || entry.name || kref;
  return h("li", {}, kref ? krefLink(kref, label) : label,
    entry.title && kref ? h("span", { class: "muted small" }, ` ${kref}`) : null,
    entry.depth > 1 ? h("span", { class: "muted small" }, ` (${entry.depth} steps away)`) : null,
    Array.isArray(entry.chain) ? h("ol", {}, entry.chain.map(refEntry)) : null);
}

function refList(entries, empty) {
  if (!entries || !entries.length) return h("p", { class: "muted" }, empty);
  return h("ol", { class: "chain" }, entries.map(refEntry));
}

// A tag of the item: its name, and the revision it points at ("latest → r2").
function tagLabel(tag) {
  if (typeof tag === "string") return tag;
  const number = /[?&]r=(\d+)/.exec(tag.revision_kref || "");
  return `${tag.tag || tag.name || "?"}${number ? ` → r${number[1]}` : ""}`;
}

function edgeRow(edge) {
  return h("li", {}, h("span", { class: "badge" }, edge.edge_type || "edge"), " ",
    krefLink(edge.source_kref || edge.source || ""), " → ", krefLink(edge.target_kref || edge.target || ""),
    edge.metadata && Object.keys(edge.metadata).length ? h("div", { class: "small" }, valueView(edge.metadata)) : null);
}

// The confirmation dialog of index.html; resolves to {reason} or null when cancelled (Escape too).
function confirmAction(text, withReason, confirmLabel) {
  const dialog = document.getElementById("confirm-dialog");
  const reason = document.getElementById("confirm-reason");
  const cancel = document.getElementById("confirm-cancel");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = confirmLabel;
  document.getElementById("confirm-reason-row").hidden = !withReason;
  reason.value = "";
  dialog.returnValue = "";
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const onCancel = () => dialog.close("cancel");
    const onClose = () => {
      dialog.removeEventListener("close", onClose);
      cancel.removeEventListener("click", onCancel);
      if (opener && opener.focus) opener.focus();
      resolve(dialog.returnValue === "ok" ? { reason: reason.value.trim() } : null);
    };
    dialog.addEventListener("close", onClose);
    cancel.addEventListener("click", onCancel);
    dialog.showModal();
    (withReason ? reason : cancel).focus();
  });
}

export async function itemView(root, params) {
  const kref = params.get("kref") || "";
  root.append(h("p", {}, h("a", { href: "#/memories" }, "← Memories")));
  if (!kref) {
    root.append(h("h1", {}, "Memory"), h("p", {}, "No memory chosen: open one from the memory list."));
    return;
  }
  let data;
  try {
    data = await api("/api/v1/inspect", { query: { kref } });
  } catch (error) {
    root.append(h("h1", {}, "Memory"), failure(`The memory ${kref}`, error));
    return;
  }
  const item = data.item || {};
  const revision = data.revision || {};
  const meta = revision.metadata || {};
  const status = h("div", { role: "status", class: "action-status" });
  const deprecated = Boolean(item.deprecated);

  const toggle = h("button", { type: "button", class: deprecated ? "primary" : "danger", id: "toggle-deprecated" },
    deprecated ? "Restore" : "Deprecate");
  toggle.addEventListener("click", async () => {
    const name = item.item_name || item.name || item.kref;
    const answer = await confirmAction(
      deprecated ? `Restore “${name}”? Searches and recall will find it again.`
        : `Deprecate “${name}”? Searches and recall stop returning it; it can be restored later.`,
      !deprecated, deprecated ? "Restore" : "Deprecate");
    if (!answer) return;
    toggle.disabled = true;
    try {
      const body = deprecated ? { kref: item.kref } : { kref: item.kref, ...(answer.reason ? { reason: answer.reason } : {}) };
      await api(deprecated ? "/api/v1/restore" : "/api/v1/deprecate", { method: "POST", body });
      status.textContent = deprecated ? "Restored." : "Deprecated.";
      window.dispatchEvent(new HashChangeEvent("hashchange")); // show the new state
    } catch (error) {
      toggle.disabled = false;
      clear(status).append(failure(deprecated ? "Restore" : "Deprecate", error));
    }
  });

  const provenance = data.provenance || {};
  const artifacts = data.artifacts || [];
  // the heading and the actions first: whatever the texts below hold, the memory can still be deprecated
  root.append(
    h("h1", {}, meta.title || item.item_name || item.name || item.kref),
    h("p", { class: "muted" }, [item.kind, item.space, `created ${when(item.created_at)}`].filter(Boolean).join(" · "),
      deprecated ? h("span", { class: "badge bad", id: "deprecated-badge" }, "deprecated") : null),
    h("p", { class: "small" }, h("code", {}, item.kref || kref)),
    h("div", { class: "actions" }, toggle, status));
  root.append(
    h("div", { class: "columns" },
      h("div", {},
        meta.summary ? section("Summary", "sec-summary", markdownOrPlain(String(meta.summary))) : null,
        section("Provenance", "sec-provenance",
          h("h3", {}, "Derived from"), refList(provenance.derived_from, "Not derived from other memories."),
          h("h3", {}, "Derived into"), refList(provenance.derived, "No memory derives from this one."),
          h("h3", {}, "Supersedes"), refList(provenance.supersedes, "Supersedes nothing."),
          h("h3", {}, "Superseded by"), refList(provenance.superseded_by, "Not superseded."),
          h("h3", {}, "Contested"), provenance.contested && provenance.contested.length
            ? h("ul", { class: "chain" }, provenance.contested.map(edgeRow)) : h("p", { class: "muted" }, "Not contested.")),
        section("Artifacts", "sec-artifacts", artifacts.length ? artifacts.map((artifact) => h("article", { class: "artifact" },
          h("h3", {}, artifact.name || artifact.kref),
          h("p", { class: "muted small" }, artifact.location || ""),
          typeof artifact.text === "string" ? markdownOrPlain(artifact.text)
            : h("p", { class: "muted" }, "No text stored for this artifact."),
          artifact.text_truncated ? h("p", { class: "muted" }, "… the text is longer; only its beginning is shown.") : null,
          artifact.text_note ? h("p", { class: "muted" }, String(artifact.text_note)) : null))
          : h("p", { class: "muted" }, "No artifacts."))),
      h("div", {},
        section("Revisions", "sec-revisions", h("table", {},
          h("thead", {}, h("tr", {}, ["#", "Tags", "Created", ""].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, (data.revisions || []).map((r) => h("tr", { class: r.kref === revision.kref ? "current" : "" },
            h("td", {}, String(r.number ?? "")),
            h("td", {}, (r.tags || []).join(", ")),
            h("td", {}, when(r.created_at)),
            h("td", {}, r.kref === revision.kref ? h("span", { class: "muted" }, "shown")
              : krefLink(r.kref, `open r${r.number}`))))))),
        section("Tags", "sec-tags", (data.tags || []).length
          ? h("ul", { class: "tags" }, data.tags.map((t) => h("li", { class: "badge" }, tagLabel(t))))
          : h("p", { class: "muted" }, "No tags.")),
        section("Metadata", "sec-metadata", valueView(Object.fromEntries(
          Object.entries(meta).filter(([key]) => key !== "summary" && key !== "title")))))));
}
