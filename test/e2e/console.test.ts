/**
 * The web console (/console) in a real headless Chromium against a real control plane and data plane:
 * every test opens its own browser context, signs in through the form and works on definitions with
 * names of its own, so the tests do not depend on each other's order. A screenshot of each test's
 * last page goes to the test-artifacts directory (outside the repository). Every page must load
 * without a Content-Security-Policy violation or a script error.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { join } from 'node:path';
import { apiDefinition } from '../helpers/api-definition.js';
import { launchChromium, requireChromium, screenshotDir } from '../helpers/chromium.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const T = 30_000;

let gw: Gateway;
let upstream: Upstream;
let browser: Browser;
let shots: string;
let context: BrowserContext;
let page: Page;
/** Console messages and page errors of the current test (CSP violations show up as console errors). */
let problems: string[];

beforeAll(async () => {
  requireChromium();
  // Started side by side; whatever did start is kept for afterAll to stop when another part failed.
  const started = await Promise.allSettled([startGateway(), startUpstream('console-upstream'), launchChromium(), screenshotDir('console')] as const);
  if (started[0].status === 'fulfilled') gw = started[0].value;
  if (started[1].status === 'fulfilled') upstream = started[1].value;
  if (started[2].status === 'fulfilled') browser = started[2].value;
  if (started[3].status === 'fulfilled') shots = started[3].value;
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await upstream?.close();
  if (gw) expect(await gw.stop()).toBe('');
}, T);

beforeEach(async () => {
  problems = [];
  context = await browser.newContext();
  page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.on('console', (m) => {
    if (m.type() === 'error' && !/401|Unauthorized|status of 4\d\d/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
});

afterEach(async () => {
  if (!page) return;
  const name = expect.getState().currentTestName ?? 'test';
  await page.screenshot({ path: join(shots, `${name.replace(/[^\w.-]+/g, '_').slice(0, 100)}.png`), fullPage: true });
  await context.close();
  expect(problems).toEqual([]);
});

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}`;

async function openConsole(hash = ''): Promise<void> {
  await page.goto(`${gw.cp.adminUrl}/console/${hash}`);
}

async function signIn(password = gw.cp.password): Promise<void> {
  await page.getByLabel('User name').fill(gw.cp.username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Opens the console at `hash`, signed in. */
async function openSignedIn(hash: string): Promise<void> {
  await openConsole(hash);
  await signIn();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

test('the console is served with a strict CSP, no framing and cacheable static files', async () => {
  const res = await page.goto(`${gw.cp.adminUrl}/console`);
  expect(page.url()).toBe(`${gw.cp.adminUrl}/console/`);
  const headers = res!.headers();
  expect(headers['content-security-policy']).toContain("script-src 'self'");
  expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
  expect(headers['content-security-policy']).not.toContain('unsafe-inline');
  expect(headers['x-frame-options']).toBe('DENY');
  expect(headers['cache-control']).toBe('no-cache');
  const script = await page.request.get(`${gw.cp.adminUrl}/console/js/main.js`);
  expect(script.headers()['cache-control']).toBe('public, max-age=300');
  expect(script.headers()['content-type']).toMatch(/^text\/javascript|^application\/javascript/);
  await expect(page.getByRole('heading', { name: 'Sign in to Gatehouse' }).isVisible()).resolves.toBe(true);
});

test('log in: a wrong password shows the error; the right one opens the APIs page with the token in sessionStorage only; log out forgets it', async () => {
  await openConsole();
  expect(await page.getByRole('button', { name: 'Log out' }).isVisible()).toBe(false);
  await signIn('not-the-password');
  await page.getByRole('alert').filter({ hasText: 'Sign-in failed' }).waitFor();
  expect(await page.getByRole('alert').textContent()).toMatch(/^Sign-in failed: /);

  await signIn();
  await page.getByRole('heading', { name: 'APIs' }).waitFor();
  // Expressions as strings: the page's globals are not in the tests' (Node) type library.
  const storage = await page.evaluate<{ session: string[]; local: string[] }>('({ session: Object.keys(sessionStorage), local: Object.keys(localStorage) })');
  expect(storage).toEqual({ session: ['gatehouse.console.token'], local: [] });
  const token = await page.evaluate<string>("sessionStorage.getItem('gatehouse.console.token')");
  expect(page.url()).not.toContain(token!);
  expect(page.url()).toBe(`${gw.cp.adminUrl}/console/#/apis`);

  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Gatehouse' }).waitFor();
  expect(await page.evaluate<string[]>('Object.keys(sessionStorage)')).toEqual([]);
});

test('a token the API refuses (expired, revoked) ends the session and shows the sign-in with a message', async () => {
  await openSignedIn('#/apis');
  await page.evaluate("sessionStorage.setItem('gatehouse.console.token', 'not-a-valid-token')");
  await page.getByRole('link', { name: 'OAuth servers' }).click();
  await page.getByRole('heading', { name: 'Sign in to Gatehouse' }).waitFor();
  expect(await page.getByRole('alert').textContent()).toBe('Your session has ended; please sign in again.');
  expect(await page.evaluate<string[]>('Object.keys(sessionStorage)')).toEqual([]);
});

test('create an API through the form: GET /apis shows it and the data plane serves it', async () => {
  const name = unique('ui-created');
  await openSignedIn('#/apis');
  await page.getByRole('link', { name: 'New API' }).click();
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Listen path', { exact: true }).fill(`/${name}/*`);
  await page.getByLabel('Upstream targets').fill(upstream.url);
  await page.getByRole('button', { name: 'Create' }).click();
  const saved = await page
    .getByRole('status')
    .filter({ hasText: `Created API ${name}` })
    .textContent();
  const version = Number(/snapshot version (\d+)/.exec(saved!)![1]);
  await page.locator(`tr[data-name="${name}"]`).waitFor();

  const stored = (await gw.admin.listApis()).body.find((d: { name: string }) => d.name === name);
  expect(stored).toMatchObject({
    name,
    active: true,
    proxy: { listen_path: `/${name}/*`, strip_path: true, upstreams: { targets: [{ target: upstream.url }] } },
  });
  await gw.dp.waitForVersion(version);
  const res = await gw.dp.request('GET', `/${name}/hello?x=1`);
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ upstream: 'console-upstream', url: '/hello?x=1' });
});

test('an invalid listen path shows the API’s message at the Listen path field and stores nothing', async () => {
  const name = unique('ui-invalid');
  await openSignedIn('#/apis/new');
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Listen path', { exact: true }).fill('no-leading-slash/*');
  await page.getByRole('button', { name: 'Create' }).click();
  const listenPath = page.getByLabel('Listen path', { exact: true });
  await page.locator('input[aria-invalid="true"]').waitFor();
  expect(await listenPath.getAttribute('aria-invalid')).toBe('true');
  const describedBy = await listenPath.getAttribute('aria-describedby');
  expect(await page.locator(`#${describedBy}`).textContent()).toBe('proxy.listen_path must start with "/"');
  expect(await page.getByLabel('Name', { exact: true }).getAttribute('aria-invalid')).toBeNull();
  expect((await gw.admin.getApi(name)).status).toBe(404);
  expect(page.url()).toBe(`${gw.cp.adminUrl}/console/#/apis/new`);
});

test('an error about a field without a form field highlights it in the JSON editor', async () => {
  const name = unique('ui-json');
  await openSignedIn('#/apis/new');
  const json = page.getByLabel('Definition (JSON)');
  const definition = {
    ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url] }),
    proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'sideways', targets: [{ target: upstream.url }] } },
  };
  await json.fill(JSON.stringify(definition, null, 2));
  await json.blur();
  expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe(name);
  await page.getByRole('button', { name: 'Create' }).click();
  await page.locator('textarea[aria-invalid="true"]').waitFor();
  expect(await page.locator('#definition-json-error').textContent()).toMatch(/^proxy\.upstreams\.balancing /);
  const selected = await json.evaluate((el) => {
    const area = el as unknown as { value: string; selectionStart: number; selectionEnd: number };
    return area.value.slice(area.selectionStart, area.selectionEnd);
  });
  expect(selected).toBe('"balancing"');
  expect((await gw.admin.getApi(name)).status).toBe(404);
});

test('edit an API: the change is saved as a merge patch and the rest of the definition is kept', async () => {
  const name = unique('ui-edit');
  const created = await gw.admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url], hosts: ['edit.example'] }));
  expect(created.status).toBe(201);
  await openSignedIn('#/apis');
  await page.getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { name: `API ${name}` }).waitFor();
  expect(await page.getByLabel('Name', { exact: true }).getAttribute('readonly')).toBe('');
  expect(await page.getByLabel('Hosts').inputValue()).toBe('edit.example');
  await page.getByLabel('Listen path', { exact: true }).fill(`/${name}-v2/*`);
  await page.getByLabel('Active').uncheck();
  await page.getByRole('button', { name: 'Save' }).click();
  await page
    .getByRole('status')
    .filter({ hasText: `Saved API ${name}` })
    .waitFor();

  const stored = (await gw.admin.getApi(name)).body;
  expect(stored).toMatchObject({
    name,
    active: false,
    hosts: ['edit.example'],
    proxy: { listen_path: `/${name}-v2/*`, upstreams: { targets: [{ target: upstream.url }] } },
  });
});

test('match headers and the upstream protocol through the form: stored, served, and shown back for editing', async () => {
  const name = unique('ui-headers');
  await openSignedIn('#/apis/new');
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Listen path', { exact: true }).fill(`/${name}/*`);
  await page.getByLabel('Match headers').fill('X-Canary: true, yes\nX-Tenant: acme');
  await page.getByLabel('Upstream targets').fill(upstream.url);
  await page.getByRole('button', { name: 'Create' }).click();
  const saved = await page
    .getByRole('status')
    .filter({ hasText: `Created API ${name}` })
    .textContent();
  const version = Number(/snapshot version (\d+)/.exec(saved!)![1]);

  const stored = (await gw.admin.getApi(name)).body;
  expect(stored.proxy.match_headers).toEqual({ 'x-canary': ['true', 'yes'], 'x-tenant': ['acme'] });
  expect(stored.proxy.upstreams.protocol).toBeUndefined();
  await gw.dp.waitForVersion(version);
  expect((await gw.dp.request('GET', `/${name}/a`, { headers: { 'x-canary': 'yes', 'x-tenant': 'acme' } })).status).toBe(200);
  expect((await gw.dp.request('GET', `/${name}/a`, { headers: { 'x-canary': 'yes' } })).status).toBe(404);

  await page.locator(`tr[data-name="${name}"]`).waitFor();
  await page.getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { name: `API ${name}` }).waitFor();
  expect(await page.getByLabel('Match headers').inputValue()).toBe('x-canary: true, yes\nx-tenant: acme');
  await page.getByLabel('Match headers').fill('x-canary: true');
  await page.getByLabel('Upstream protocol').selectOption('http2');
  await page.getByRole('button', { name: 'Save' }).click();
  await page
    .getByRole('status')
    .filter({ hasText: `Saved API ${name}` })
    .waitFor();
  const edited = (await gw.admin.getApi(name)).body;
  expect(edited.proxy.match_headers).toEqual({ 'x-canary': ['true'] });
  expect(edited.proxy.upstreams.protocol).toBe('http2');

  // A line without a colon is a header with no values: the API's message lands at the field.
  await page.getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { name: `API ${name}` }).waitFor();
  await page.getByLabel('Match headers').fill('x-canary');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.locator('textarea[aria-invalid="true"][data-path="proxy.match_headers"]').waitFor();
  const describedBy = await page.getByLabel('Match headers').getAttribute('aria-describedby');
  expect(await page.locator(`#${describedBy}`).textContent()).toMatch(/^proxy\.match_headers\.x-canary /);
  expect((await gw.admin.getApi(name)).body.proxy.match_headers).toEqual({ 'x-canary': ['true'] });
});

test('delete an API from the list (two clicks)', async () => {
  const name = unique('ui-delete');
  expect((await gw.admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url] }))).status).toBe(201);
  await openSignedIn('#/apis');
  const remove = page.getByRole('button', { name: `Delete ${name}` });
  await remove.click();
  expect(await remove.textContent()).toBe('Confirm delete');
  expect((await gw.admin.getApi(name)).status).toBe(200);
  await remove.click();
  await page
    .getByRole('status')
    .filter({ hasText: `Deleted API ${name}` })
    .waitFor();
  expect(await page.locator(`tr[data-name="${name}"]`).count()).toBe(0);
  expect((await gw.admin.getApi(name)).status).toBe(404);
});

test('create an OAuth server through the form', async () => {
  const name = unique('ui-oauth');
  await openSignedIn('#/oauth-servers');
  await page.getByRole('link', { name: 'New OAuth server' }).click();
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Token endpoint listen path').fill(`/${name}/token`);
  await page.getByLabel('Token endpoint targets').fill(`${upstream.url}/token`);
  await page.getByLabel('Token strategy').selectOption('storage');
  await page.getByRole('button', { name: 'Create' }).click();
  await page
    .getByRole('status')
    .filter({ hasText: `Created OAuth server ${name}` })
    .waitFor();
  await page.locator(`tr[data-name="${name}"]`).waitFor();

  const stored = await gw.admin.getOAuthServer(name);
  expect(stored.status).toBe(200);
  expect(stored.body).toMatchObject({
    name,
    oauth_endpoints: { token: { listen_path: `/${name}/token`, upstreams: { targets: [{ target: `${upstream.url}/token` }] } } },
    token_strategy: { name: 'storage' },
  });
});

test('the data planes page shows the connected data plane and the snapshot version it applied', async () => {
  const write = await gw.admin.createApi(apiDefinition({ name: unique('ui-dp'), listenPath: `/${unique('dp')}/*`, targets: [upstream.url] }));
  const version = await gw.admin.waitForDataPlanes(write, [gw.dp]);
  // The CP records the DP's ACK right after the DP applied it.
  await pollUntil(async () => ((await gw.admin.dataplanes()).body.find((d: { id: string }) => d.id === gw.dp.id)?.version >= version ? true : undefined), {
    what: `the CP to record the ACK of version ${version}`,
  });
  await openSignedIn('#/dataplanes');
  const row = page.locator(`tr[data-id="${gw.dp.id}"]`);
  await row.waitFor();
  const cells = await row.locator('td').allTextContents();
  expect(cells[0]).toBe(gw.dp.id);
  expect(Number(/^(\d+)/.exec(cells[4])![1])).toBeGreaterThanOrEqual(version);
  expect(cells[5]).toMatch(/^v\d+ at /);
  expect(cells[6]).toBe('');
  expect(await page.locator('#cp-version').textContent()).toMatch(/^Control plane snapshot version: \d+ · 1 data plane\(s\) connected$/);
});

test('a NACK is shown with its version and error (the /dataplanes and /readyz answers stubbed in the browser)', async () => {
  const nack = { version: 7, error: 'route orders: listen path does not compile', at: new Date().toISOString() };
  const stub = {
    id: 'dp-nacked',
    hostname: 'h',
    address: '10.0.0.9:5000',
    proxy_address: '10.0.0.9:8080',
    software_version: '0.1.0',
    auth: { method: 'join-token' },
    connected_since: nack.at,
    version: 6,
    hash: 'abc',
    last_ack: { version: 6, at: nack.at },
    last_nack: nack,
  };
  await page.route('**/dataplanes', (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify([stub]) }));
  await page.route('**/readyz', (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ ready: true, snapshot: { version: 9, hash: 'def' } }) }),
  );
  await openSignedIn('#/dataplanes');
  const row = page.locator('tr[data-id="dp-nacked"]');
  await row.waitFor();
  const cells = await row.locator('td').allTextContents();
  expect(cells[3]).toBe('join-token');
  expect(cells[4]).toBe('6 behind v9');
  expect(cells[6]).toContain('NACK v7');
  expect(cells[6]).toContain(nack.error);
});

test('ALLOW_SHORT_HMAC_KEYS on the control plane is said above the data planes (the /dataplanes answer stubbed in the browser)', async () => {
  const at = new Date().toISOString();
  const row = {
    id: 'dp-short-keys',
    hostname: 'h',
    address: '10.0.0.9:5000',
    proxy_address: '10.0.0.9:8080',
    software_version: '0.1.0',
    auth: { method: 'join-token' },
    connected_since: at,
    version: 3,
    hash: 'abc',
    last_ack: { version: 3, at },
    last_nack: null,
  };
  await page.route('**/dataplanes', (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify([{ ...row, allow_short_hmac_keys: true }]) }),
  );
  await openSignedIn('#/dataplanes');
  await page.locator('tr[data-id="dp-short-keys"]').waitFor();
  expect(await page.locator('#short-hmac-keys').textContent()).toBe(
    'ALLOW_SHORT_HMAC_KEYS=true: HS keys shorter than 32 bytes are accepted (RFC 7518 §3.2 asks for 32). Rotate them, then unset it.',
  );
  await page.unroute('**/dataplanes');
  await page.route('**/dataplanes', (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify([row]) }));
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.locator('#short-hmac-keys').waitFor({ state: 'detached' });
});

test('the explain form shows the matched API, the rewritten upstream URL and the candidate that lost', async () => {
  const name = unique('ui-explain');
  expect((await gw.admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url], stripPath: true }))).status).toBe(201);
  const postOnly = `${name}-post`;
  expect(
    (await gw.admin.createApi(apiDefinition({ name: postOnly, listenPath: `/${name}/orders/*`, methods: ['POST'], targets: [upstream.url] }))).status,
  ).toBe(201);
  await openSignedIn('#/explain');
  await page.getByLabel('Method').fill('GET');
  await page.getByLabel('Path').fill(`/${name}/orders/1?x=1`);
  await page.getByRole('button', { name: 'Explain' }).click();
  const result = page.locator('#explain-result');
  await result.locator('.notice').waitFor();
  expect(await result.locator('.notice').textContent()).toBe(`Matched API ${name}`);
  expect(await result.locator('table').first().locator('tbody td').nth(2).textContent()).toBe(`${upstream.url}/orders/1?x=1`);
  expect(await result.locator(`tr[data-candidate="${postOnly}"]`).textContent()).toContain('method GET is not one of POST');
});

test('the explain form shows the API’s message at the field it names', async () => {
  await openSignedIn('#/explain');
  await page.getByLabel('Path').fill('no-slash');
  await page.getByRole('button', { name: 'Explain' }).click();
  await page.locator('#explain-result .notice').waitFor();
  expect(await page.locator('#explain-result .notice').textContent()).toMatch(/^path /);
  expect(await page.getByLabel('Path').getAttribute('aria-invalid')).toBe('true');
  expect(await page.getByLabel('Method').getAttribute('aria-invalid')).toBeNull();
});
