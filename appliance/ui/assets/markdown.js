// A small Markdown renderer that builds DOM nodes (never HTML strings): headings, paragraphs, lists, block quotes,
// fenced code, rules, and inline code, bold, italic and links. Raw HTML in the text stays visible text.

import { h } from "./dom.js";

// Every alternative stops at the next character that could start or end another match of its kind (a backtick, a
// star, an underscore, a bracket or parenthesis), so a scan from one position never runs past the next such
// position: the search stays linear in the text's length, whatever the text (60,000 "[" included). A link's
// label is at most 1,000 characters and its target 2,048.
const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*|__[^_]+__)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^[\]\n]{1,1000}\]\([^()\s]{1,2048}\))/g;
const LINK = /^\[([^\]]+)\]\(([^)]+)\)$/;

function inline(text) {
  const out = [];
  const pattern = new RegExp(INLINE); // own lastIndex: inline() nests for bold and italic
  let last = 0;
  for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
    const [token, code, strong, em, link] = match;
    if (match.index > last) out.push(text.slice(last, match.index));
    last = match.index + token.length;
    if (code) out.push(h("code", {}, code.slice(1, -1)));
    else if (strong) out.push(h("strong", {}, inline(strong.slice(2, -2))));
    else if (em) out.push(h("em", {}, inline(em.slice(1, -1))));
    else if (link) {
      const [, label, href] = LINK.exec(link);
      // only web and kref links become links; anything else (javascript:, data:) stays text
      if (/^https?:\/\//i.test(href)) out.push(h("a", { href, rel: "noopener noreferrer", target: "_blank" }, label));
      else if (/^kref:\/\//.test(href)) out.push(h("a", { href: `#/item?kref=${encodeURIComponent(href)}` }, label));
      else out.push(token);
    }
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// Block quotes nest this deep; a deeper `>` stays in the text (one level is one call: a line of 5,000 `>` must not
// exhaust the stack).
const MAX_QUOTE_DEPTH = 8;

export function renderMarkdown(source, depth = 0) {
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
    if (depth < MAX_QUOTE_DEPTH && /^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      root.append(h("blockquote", {}, renderMarkdown(body.join("\n"), depth + 1)));
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
