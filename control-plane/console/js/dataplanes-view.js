// Connected data planes (GET /dataplanes) next to the control plane's current snapshot version
// (GET /readyz): which version each applied, its last ACK and NACK with the error. Refreshes every 5 s.
import { api } from './api-client.js';
import { h, table } from './element.js';

const REFRESH_MS = 5000;

const badge = (kind, text) => h('span', { class: `badge ${kind}` }, text);
const at = (iso) => (iso ? new Date(iso).toLocaleString() : '');

function versionCell(dp, cpVersion) {
  if (dp.version === null || dp.version === undefined) return badge('muted', 'none');
  const behind = typeof cpVersion === 'number' && dp.version < cpVersion;
  return h('span', {}, String(dp.version), ' ', behind ? badge('bad', `behind v${cpVersion}`) : badge('ok', 'current'));
}

const columns = (cpVersion) => [
  ['ID', (dp) => dp.id],
  ['Address', (dp) => [dp.address, dp.proxy_address ? h('div', { class: 'hint' }, `proxy ${dp.proxy_address}`) : null]],
  ['Software', (dp) => dp.software_version],
  ['Auth', (dp) => [dp.auth?.method ?? '', dp.auth?.subject ? h('div', { class: 'hint' }, dp.auth.subject) : null]],
  ['Snapshot version', (dp) => versionCell(dp, cpVersion)],
  ['Last ACK', (dp) => (dp.last_ack ? `v${dp.last_ack.version} at ${at(dp.last_ack.at)}` : '')],
  [
    'Last NACK',
    (dp) =>
      dp.last_nack ? [badge('bad', `NACK v${dp.last_nack.version}`), ' ', at(dp.last_nack.at), h('div', { class: 'field-error' }, dp.last_nack.error)] : '',
  ],
  ['Connected since', (dp) => at(dp.connected_since)],
];

export async function dataPlanesView(ctx) {
  const body = h('div', {});
  const summary = h('p', { id: 'cp-version' });
  const load = async () => {
    const [{ data: dataPlanes }, ready] = await Promise.all([api('GET', '/dataplanes'), api('GET', '/readyz').catch(() => null)]);
    const cpVersion = ready?.data?.snapshot?.version;
    summary.textContent = `Control plane snapshot version: ${cpVersion ?? 'unknown'} · ${dataPlanes.length} data plane(s) connected`;
    // ALLOW_SHORT_HMAC_KEYS=true on the control plane: said above the table while it lasts.
    const shortKeys = dataPlanes.some((dp) => dp.allow_short_hmac_keys)
      ? h(
          'p',
          { class: 'field-error', id: 'short-hmac-keys' },
          'ALLOW_SHORT_HMAC_KEYS=true: HS keys shorter than 32 bytes are accepted (RFC 7518 §3.2 asks for 32). Rotate them, then unset it.',
        )
      : null;
    body.replaceChildren(
      ...(shortKeys ? [shortKeys] : []),
      table(columns(cpVersion), dataPlanes, 'No data plane is connected.', (dp) => ({ 'data-id': dp.id })),
    );
  };
  await load();
  const timer = setInterval(() => load().catch(() => {}), REFRESH_MS);
  ctx.onLeave(() => clearInterval(timer));
  return h(
    'section',
    { 'aria-labelledby': 'title' },
    h(
      'div',
      { class: 'actions' },
      h('h1', { id: 'title' }, 'Data planes'),
      h('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Refresh'),
    ),
    summary,
    body,
  );
}
