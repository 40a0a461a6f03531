// The live event feed (GET /api/v1/events): writes, deprecations, job progress, Dream State runs as they happen.

import { failure, h, krefLink, when } from "../dom.js";
import { openEventStream } from "../sse.js";

const KEEP = 300; // rows kept on screen; older ones drop off the bottom

export async function liveView(root) {
  const state = h("span", { id: "stream-state", class: "badge" }, "connecting");
  const filter = h("input", { id: "live-filter", type: "search", maxlength: 100, placeholder: "e.g. item.created" });
  const pause = h("button", { type: "button", "aria-pressed": "false" }, "Pause");
  const rows = h("tbody", {});
  const table = h("table", { class: "events" },
    h("caption", { class: "sr-only" }, "Events, newest first"),
    h("thead", {}, h("tr", {}, ["#", "Event", "Memory", "Project", "At"].map((c) => h("th", { scope: "col" }, c)))), rows);
  const notice = h("div", {});
  root.append(h("h1", {}, "Live events"),
    h("div", { class: "toolbar" }, h("span", {}, "Stream: ", state),
      h("label", { for: "live-filter" }, "Show kinds containing"), filter, pause),
    notice, h("div", { role: "log", "aria-label": "event log", class: "log" }, table));

  let paused = false;
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "Resume" : "Pause";
  });

  const close = openEventStream("/api/v1/events", {
    onState(name, detail) {
      state.textContent = name;
      state.className = `badge ${name === "open" ? "ok" : name === "retrying" ? "" : "bad"}`;
      if (name === "unavailable") {
        notice.append(failure("The event feed", { missingRoute: true, status: detail, message: "" }));
      } else if (name === "unauthorized") {
        notice.append(failure("The event feed", { message: detail }));
      }
    },
    onEvent({ id, event, data }) {
      if (paused) return;
      const kind = (data && data.kind) || event;
      if (filter.value && !kind.includes(filter.value.trim())) return;
      const kref = data && data.kref;
      rows.prepend(h("tr", { dataset: { kind } },
        h("td", {}, id ?? ""), h("td", {}, kind),
        h("td", {}, kref ? krefLink(kref) : ""), h("td", {}, (data && data.project) || ""),
        h("td", {}, when(data && data.at))));
      while (rows.children.length > KEEP) rows.lastElementChild.remove();
    },
  });
  return close;
}
