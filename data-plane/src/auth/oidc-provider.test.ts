/**
 * The OpenID provider client's retain step against two real providers on loopback (test/helpers/oidc-provider.ts),
 * through real upstream pools: every discovery and JWKS fetch is counted at the provider.
 */
import { parseApiDefinition } from '#proto/definition/index';
import { compilePlugins, type CompiledOpenidConnect } from '#proto/plugins/index';
import { pollUntil } from '../../../test/helpers/poll-until.js';
import { startOidcProvider, type OidcProvider } from '../../../test/helpers/oidc-provider.js';
import { createUpstreamPools, type UpstreamPools } from '../proxy/upstream-pools.js';
import { createJwksCache } from './jwks-cache.js';
import { createOidcProviders, type OidcProviders } from './oidc-provider.js';

let kept: OidcProvider;
let dropped: OidcProvider;
let pools: UpstreamPools;
let oidc: OidcProviders;

function openidConnectConfig(provider: OidcProvider): CompiledOpenidConnect {
  const config = { issuer: provider.issuer, client_id: provider.clientId, client_secret: provider.clientSecret, cookie_secret: 'k'.repeat(32) };
  const def = parseApiDefinition({
    name: 'app',
    proxy: { listen_path: '/app/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'openid_connect', config }],
  });
  return compilePlugins(def.plugins)[0]!.config as CompiledOpenidConnect;
}

/** Resolves once `provider` has served `count` JWKS fetches in all. */
const jwksFetched = (provider: OidcProvider, count: number) =>
  pollUntil(async () => (provider.jwksFetches >= count ? true : undefined), { what: `JWKS fetch ${count} of ${provider.issuer}`, timeoutMs: 5_000 });

beforeEach(async () => {
  [kept, dropped] = await Promise.all([startOidcProvider(), startOidcProvider()]);
  pools = createUpstreamPools();
  oidc = createOidcProviders({ pools, jwks: createJwksCache({ pools }) });
});
afterEach(async () => {
  await pools.close();
  await Promise.all([kept.close(), dropped.close()]);
});

test('retain forgets the document and JWKS of an issuer no longer configured; the kept issuer is not fetched again', async () => {
  const [keptConfig, droppedConfig] = [openidConnectConfig(kept), openidConnectConfig(dropped)];
  await Promise.all([oidc.endpoints(keptConfig), oidc.endpoints(droppedConfig)]);
  // The JWKS of every discovered issuer is fetched at once, so the first sign-in finds its keys.
  oidc.retain([keptConfig, droppedConfig]);
  await Promise.all([jwksFetched(kept, 1), jwksFetched(dropped, 1)]);

  oidc.retain([keptConfig]);
  await oidc.endpoints(keptConfig);
  expect([kept.discoveryFetches, kept.jwksFetches]).toEqual([1, 1]);

  // Asked again, the dropped issuer is discovered and its keys fetched anew: nothing of it was held.
  await oidc.endpoints(droppedConfig);
  expect(dropped.discoveryFetches).toBe(2);
  oidc.retain([keptConfig, droppedConfig]);
  await jwksFetched(dropped, 2);
  expect([kept.discoveryFetches, kept.jwksFetches]).toEqual([1, 1]);
});

test('retain with no openid_connect left holds nothing', async () => {
  const config = openidConnectConfig(kept);
  await oidc.endpoints(config);
  oidc.retain([]);
  await oidc.endpoints(config);
  expect(kept.discoveryFetches).toBe(2);
});
