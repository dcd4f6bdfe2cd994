// The comparison of bench/commonmark.py, run in the page: both trees (the spec's HTML and
// the DOM the renderer built) are written in one canonical form and compared as strings.
(() => {
  // One canonical form for both trees: elements with sorted attributes, text with runs of
  // whitespace collapsed, whitespace-only text between block elements dropped.
  const BLOCK = new Set(["P","H1","H2","H3","H4","H5","H6","UL","OL","LI","BLOCKQUOTE","PRE","HR","TABLE","THEAD","TBODY","TR","TH","TD","DIV"]);
  function canon(node, chat) {
    let out = "";
    for (const child of node.childNodes) {
      if (child.nodeType === 3) {
        let text = child.data;
        const inPre = child.parentNode.closest && child.parentNode.closest("pre");
        if (!inPre) text = text.replace(/\s+/g, " ");
        else if (!child.nextSibling) text = text.replace(/\n$/, "");
        const blockAround = (n) => !n || (n.nodeType === 1 && BLOCK.has(n.tagName));
        if (/^\s*$/.test(text) && blockAround(child.previousSibling) && blockAround(child.nextSibling)) continue;
        out += text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
      } else if (child.nodeType === 1) {
        const tag = child.tagName.toLowerCase();
        const attrs = [];
        for (const a of child.attributes) {
          let { name, value } = a;
          if (name === "class" && tag === "code" && value.startsWith("language-")) { name = "data-lang"; value = value.slice(9); }
          if (name === "data-open") continue;
          if (chat && tag === "a" && (name === "rel" || name === "target" || name === "title")) continue;
          if (tag === "a" && name === "href") { try { value = new URL(value).href; } catch { /* relative */ } }
          attrs.push(`${name}="${value}"`);
        }
        attrs.sort();
        if (chat && tag === "br") { out += "\n"; continue; }
        out += `<${[tag, ...attrs].join(" ")}>${canon(child, chat)}</${tag}>`;
      }
    }
    return out;
  }
  // The chat's link policy applied to the spec's HTML: only absolute http(s) and mailto
  // links stay links (others keep their label), a picture is a link labelled by its alt text.
  function policy(root) {
    const safe = (url) => {
      try {
        return ["http:", "https:", "mailto:"].includes(new URL(url).protocol);
      } catch {
        return false;
      }
    };
    for (const img of [...root.querySelectorAll("img")]) {
      const alt = img.getAttribute("alt") || "";
      if (safe(img.getAttribute("src"))) {
        const a = document.createElement("a");
        a.setAttribute("href", img.getAttribute("src"));
        a.textContent = alt;
        img.replaceWith(a);
      } else img.replaceWith(alt);
    }
    for (const a of [...root.querySelectorAll("a")]) if (!safe(a.getAttribute("href") || "")) a.replaceWith(...a.childNodes);
    root.normalize();
    return root;
  }
  function tidy(html, chat) {
    if (chat) html = html.replace(/\n/g, " ");
    return html.replace(/\s*(<\/?(p|h[1-6]|ul|ol|li|blockquote|pre|hr|table|thead|tbody|tr|th|td)[ >])/g, "$1").replace(/ +/g, " ").trim();
  }
  window.compare = async (examples) => {
    const { renderMarkdown, markdownReady } = await import("/static/flarebot/markdown.js");
    await markdownReady();
    return examples.map(({ markdown, html }) => {
      const expected = document.createElement("template");
      expected.innerHTML = html;
      const actual = document.createElement("div");
      try { actual.append(renderMarkdown(markdown)); } catch (e) { return [false, false, String(e)]; }
      const strict = tidy(canon(expected.content, false), false) === tidy(canon(actual, false), false);
      const chat = tidy(canon(policy(expected.content), true), true) === tidy(canon(actual, true), true);
      return [strict, chat, tidy(canon(actual, false), false)];
    });
  };
})();
