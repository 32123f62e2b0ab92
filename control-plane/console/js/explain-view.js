// POST /explain: which API would serve a request, which candidates lost and why, the upstream URL after
// rewriting and the plugins that would run (computed by the CP with the data plane's routing code).
import { api, ApiError } from './api-client.js';
import { h, notice, table } from './element.js';
import { fieldPathOf } from './json-path.js';

function field(id, label, input, hint) {
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('span', { class: 'hint' }, hint) : null);
}

/** "Name: value" lines → { name: value }. */
function parseHeaders(text) {
  const headers = {};
  for (const line of text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`header line "${line}" is not "Name: value"`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

const none = () => h('span', { class: 'hint' }, 'none');
const routeLabel = (r) => (r.endpoint ? `OAuth server ${r.name} (${r.endpoint} endpoint)` : `API ${r.name}`);

/** The answer of POST /explain (route, upstreams, plugins, candidates) as headings, lists and tables. */
function renderExplanation(result) {
  const route = result.route;
  const summary = route
    ? notice('ok', `Matched ${routeLabel(route)}`)
    : notice('error', 'No API matches this request: the proxy answers 404 "no API found with those values".');
  const params = Object.entries(route?.params ?? {});
  return [
    h('h2', {}, 'Result'),
    summary,
    route
      ? h(
          'dl',
          { class: 'result' },
          h('dt', {}, 'Listen path'),
          h('dd', {}, route.listen_path ?? none()),
          h('dt', {}, 'Matched path'),
          h('dd', {}, route.matched_path),
          h('dt', {}, 'Parameters'),
          h('dd', {}, params.length ? params.map(([k, v]) => `${k}=${v}`).join(', ') : none()),
          h('dt', {}, 'Plugins (in order)'),
          h('dd', {}, result.plugins?.length ? result.plugins.join(' → ') : none()),
        )
      : null,
    route ? h('h2', {}, 'Upstream') : null,
    route
      ? table(
          [
            ['Target', (u) => u.target],
            ['Weight', (u) => String(u.weight)],
            ['URL after rewriting', (u) => u.url ?? h('span', { class: 'field-error' }, u.error ?? 'cannot be resolved')],
            ['Host header', (u) => u.host_header ?? ''],
          ],
          result.upstreams ?? [],
          'No target.',
        )
      : null,
    h('h2', {}, 'Candidates that lost'),
    table(
      [
        ['Route', (c) => routeLabel(c)],
        ['Listen path', (c) => c.listen_path ?? ''],
        [
          'Why it lost',
          (c) =>
            h(
              'ul',
              {},
              (c.details ?? c.reasons ?? []).map((d) => h('li', {}, d)),
            ),
        ],
      ],
      result.candidates ?? [],
      'No other route was considered.',
      (c) => ({ 'data-candidate': c.name }),
    ),
    h('details', {}, h('summary', {}, 'Raw answer'), h('pre', {}, JSON.stringify(result, null, 2))),
  ];
}

export function explainView() {
  const method = h('input', { type: 'text', value: 'GET', autocomplete: 'off' });
  const host = h('input', { type: 'text', placeholder: 'api.example.com', autocomplete: 'off' });
  const path = h('input', { type: 'text', value: '/', autocomplete: 'off', spellcheck: 'false' });
  const headers = h('textarea', { class: 'lines', spellcheck: 'false', placeholder: 'Authorization: Bearer …' });
  const output = h('div', { id: 'explain-result', 'aria-live': 'polite' });
  const inputs = [method, host, path, headers];

  const submit = async (event) => {
    event.preventDefault();
    output.replaceChildren();
    for (const input of inputs) input.removeAttribute('aria-invalid');
    let request;
    try {
      request = { method: method.value.trim(), host: host.value.trim() || undefined, path: path.value.trim(), headers: parseHeaders(headers.value) };
    } catch (err) {
      output.append(notice('error', err.message));
      return;
    }
    try {
      const { data } = await api('POST', '/explain', request);
      output.append(...renderExplanation(data));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return;
      // "path must start with /": mark the input the message names.
      inputs.find((input) => input.id === `explain-${fieldPathOf(err.message)?.split(/[.[]/)[0]}`)?.setAttribute('aria-invalid', 'true');
      output.append(notice('error', err.message));
    }
  };

  return h(
    'section',
    { 'aria-labelledby': 'title' },
    h('h1', { id: 'title' }, 'Explain a request'),
    h('p', { class: 'hint' }, 'Which API would serve this request, computed with the data plane’s router on the current snapshot.'),
    h(
      'form',
      { class: 'stacked', novalidate: true, onsubmit: submit },
      field('explain-method', 'Method', method),
      field('explain-host', 'Host', host, 'the Host header; empty = none'),
      field('explain-path', 'Path', path, 'with the query string, e.g. /orders/42?x=1'),
      field('explain-headers', 'Headers', headers, 'one "Name: value" per line'),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Explain')),
    ),
    output,
  );
}
