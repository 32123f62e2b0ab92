// Builds DOM elements without HTML strings: text is always a text node, so data from the API is never parsed as markup.

/**
 * h('a', { href: '#/apis', onclick: fn }, 'APIs'): attributes (true = present, false/null/undefined = absent),
 * `on<event>` listeners, children (strings, nodes, arrays; null/false skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** A notice box: kind 'error' | 'ok'. role=alert for errors so screen readers announce them. */
export function notice(kind, text) {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** A table of rows, one column per [heading, cell(row)] pair; `empty` when there are no rows. */
export function table(columns, rows, empty, rowAttrs = () => ({})) {
  return h(
    'table',
    {},
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        columns.map(([heading]) => h('th', { scope: 'col' }, heading)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.length === 0
        ? h('tr', {}, h('td', { class: 'empty', colspan: columns.length }, empty))
        : rows.map((row) =>
            h(
              'tr',
              rowAttrs(row),
              columns.map(([, cell]) => h('td', {}, cell(row) ?? '')),
            ),
          ),
    ),
  );
}

/** Shows `message` in `errorElement` and marks `input` invalid; null clears both. */
export function markInvalid(input, errorElement, message) {
  errorElement.textContent = message ?? '';
  errorElement.hidden = message === null;
  if (message === null) input.removeAttribute('aria-invalid');
  else input.setAttribute('aria-invalid', 'true');
}
