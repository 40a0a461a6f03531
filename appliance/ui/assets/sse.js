// Server-sent events over fetch(): EventSource cannot send an Authorization header, and the token must never go
// into a URL. Reconnects after a drop with Last-Event-ID (the graph's event sequence), backing off up to 30 s.

import { authorizedFetch } from "./api.js";

export function openEventStream(path, { onEvent, onState }) {
  const abort = new AbortController();
  let lastId = null;
  let delay = 1000;

  function dispatch(block) {
    let id = null;
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue; // keep-alive comments
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (id !== null) lastId = id;
    if (!data.length) return;
    let parsed;
    try { parsed = JSON.parse(data.join("\n")); } catch { parsed = data.join("\n"); }
    onEvent({ id, event, data: parsed });
  }

  async function run() {
    while (!abort.signal.aborted) {
      try {
        const headers = { Accept: "text/event-stream" };
        if (lastId !== null) headers["Last-Event-ID"] = lastId;
        const response = await authorizedFetch(path, { headers, signal: abort.signal });
        if (response.status === 404 || response.status === 405) { onState("unavailable", response.status); return; }
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        onState("open");
        delay = 1000;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
        onState("closed");
      } catch (error) {
        if (abort.signal.aborted) return;
        if (error && error.status === 401) { onState("unauthorized", error.message); return; }
        onState("retrying", error && error.message);
      }
      await new Promise((resolve) => window.setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }

  run();
  return () => abort.abort();
}
