/**
 * Metrics of the fetches the data plane makes to identity providers (docs/operations.md "Observability"): JWKS sets (oauth2's
 * and openid_connect's) and OpenID discovery documents by outcome, and the keys each OAuth server's set holds. Labels
 * stay bounded by configuration: an outcome, or an OAuth server's name; never a URI (openid_connect's sets are known
 * by their issuer URL alone, so they are counted in the fetches only).
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export type FetchOutcome = 'ok' | 'failed';

export interface FetchMetrics {
  jwksFetch(outcome: FetchOutcome): void;
  discoveryFetch(outcome: FetchOutcome): void;
  /** The cache whose sets gatehouse_jwks_keys reports, read at each scrape. */
  reportKeysOf(source: { heldKeys(): Iterable<readonly [server: string, keys: number]> }): void;
}

export function createFetchMetrics(registry: Registry): FetchMetrics {
  const outcomeCounter = (name: string, help: string) => {
    const counter = new Counter({ name, help, labelNames: ['outcome'], registers: [registry] });
    // Both series from the start: a rate() over a failure that has not happened yet is 0, not absent.
    for (const outcome of ['ok', 'failed']) counter.inc({ outcome }, 0);
    return counter;
  };
  const jwks = outcomeCounter('gatehouse_jwks_fetches_total', 'JWKS fetches (oauth2 jwks_uri sets and openid_connect issuers) by outcome (ok, failed).');
  const discovery = outcomeCounter('gatehouse_oidc_discovery_fetches_total', 'OpenID Connect discovery document fetches by outcome (ok, failed).');
  let source: { heldKeys(): Iterable<readonly [string, number]> } | null = null;
  new Gauge({
    name: 'gatehouse_jwks_keys',
    help: 'Keys of the JWKS set each OAuth server with a jwks_uri holds (0: none held).',
    labelNames: ['server'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [server, keys] of source?.heldKeys() ?? []) this.set({ server }, keys);
    },
  });
  return {
    jwksFetch: (outcome) => jwks.inc({ outcome }),
    discoveryFetch: (outcome) => discovery.inc({ outcome }),
    reportKeysOf: (cache) => void (source = cache),
  };
}
