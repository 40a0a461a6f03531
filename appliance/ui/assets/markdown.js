// A small Markdown renderer that builds DOM nodes (never HTML strings): headings, paragraphs, lists, block quotes,
// fenced code, rules, and inline code, bold, italic and links. Raw HTML in the text stays visible text.

import { h } from "./dom.js";

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*|__[^_]+__)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))/;

function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) { out.push(rest); break; }
    if (match.index) out.push(rest.slice(0, match.index));
    const [token, code, strong, em, link] = match;
    if (code) out.push(h("code", {}, code.slice(1, -1)));
    else if (strong) out.push(h("strong", {}, inline(strong.slice(2, -2))));
    else if (em) out.push(h("em", {}, inline(em.slice(1, -1))));
    else if (link) {
      const [, label, href] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(link);
      // only web and kref links become links; anything else (javascript:, data:) stays text
      if (/^https?:\/\//i.test(href)) out.push(h("a", { href, rel: "noopener noreferrer", target: "_blank" }, label));
      else if (/^kref:\/\//.test(href)) out.push(h("a", { href: `#/item?kref=${encodeURIComponent(href)}` }, label));
      else out.push(token);
    }
    rest = rest.slice(match.index + token.length);
  }
  return out;
}

export function renderMarkdown(source) {
  const root = h("div", { class: "markdown" });
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  if (lines[0] === "---") { // front matter (the memory's title, type, summary): shown as it is, folded
    const end = lines.indexOf("---", 1);
    if (end > 0) {
      root.append(h("details", { class: "front-matter" }, h("summary", {}, "Front matter"),
        h("pre", {}, lines.slice(1, end).join("\n"))));
      i = end + 1;
    }
  }
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      root.append(h("pre", {}, h("code", {}, body.join("\n"))));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      // item text headings sit below the page's own h1/h2
      root.append(h(`h${Math.min(6, heading[1].length + 2)}`, {}, inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(h("hr")); i += 1; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      root.append(h("blockquote", {}, renderMarkdown(body.join("\n"))));
      continue;
    }
    const bullet = /^\s*([-*+]|\d+[.)])\s+/;
    if (bullet.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length && bullet.test(lines[i])) {
        list.append(h("li", {}, inline(lines[i].replace(bullet, ""))));
        i += 1;
      }
      root.append(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s)/.test(lines[i])) {
      para.push(lines[i++].trim());
    }
    if (!para.length) para.push(lines[i++].trim());
    root.append(h("p", {}, inline(para.join(" "))));
  }
  return root;
}
