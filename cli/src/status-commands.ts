/** Read-only views: `gatehouse dataplanes` and `gatehouse explain <method> <path>`. */
import type { Command } from 'commander';
import { request } from './admin-http.js';
import { withContext } from './context.js';
import { formatTable, print } from './output.js';

// biome-ignore lint/suspicious/noExplicitAny: an admin API answer, untyped JSON read field by field for display.
type Row = Record<string, any>;

function headerPairs(values: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const value of values) {
    const colon = value.indexOf(':');
    if (colon > 0) headers[value.slice(0, colon).trim()] = value.slice(colon + 1).trim();
  }
  return headers;
}

/** The explanation for people: the route, its upstreams and plugins, then why the others lost. */
function printExplanation(e: Row): void {
  const route = e.route;
  if (!route) console.log('route:     none (the gateway answers 404 "no API found with those values")');
  else console.log(`route:     ${route.kind} "${route.name}"${route.endpoint ? ` (${route.endpoint} endpoint)` : ''} listen_path ${route.listen_path ?? '-'}`);
  if (route) {
    console.log(`plugins:   ${(e.plugins ?? []).join(', ') || '-'}`);
    console.log('upstreams:');
    console.log(
      formatTable<Row>(e.upstreams ?? [], [
        ['  TARGET', (u) => `  ${u.target}`],
        ['URL', (u) => u.url ?? u.error],
        ['HOST', (u) => u.host_header],
      ]),
    );
  }
  if ((e.candidates ?? []).length > 0) {
    console.log('candidates that lost:');
    console.log(
      formatTable<Row>(e.candidates, [
        ['  NAME', (c) => `  ${c.name}`],
        ['LISTEN PATH', (c) => c.listen_path],
        ['WHY', (c) => (c.details ?? c.reasons ?? []).join('; ')],
      ]),
    );
  }
}

export function addStatusCommands(program: Command): void {
  program
    .command('dataplanes')
    .description('list the connected data planes and the snapshot version each applied')
    .action(
      withContext(async (ctx) => {
        const { body } = await request(await ctx.connection(), 'GET', '/dataplanes');
        print<Row>(ctx.output, body as Row[], [
          ['ID', (d) => d.id],
          ['HOSTNAME', (d) => d.hostname],
          ['ADDRESS', (d) => d.address],
          ['VERSION', (d) => d.version],
          ['LAST ACK', (d) => d.last_ack?.at],
          ['LAST NACK', (d) => (d.last_nack ? `v${d.last_nack.version}: ${d.last_nack.error}` : undefined)],
          ['CONNECTED SINCE', (d) => d.connected_since],
        ]);
      }),
    );

  program
    .command('explain')
    .argument('<method>', 'HTTP method, e.g. GET')
    .argument('<path>', 'request path with an optional ?query, e.g. /users/42')
    .option('--host <host>', 'Host header of the request')
    .option('-H, --header <header...>', 'request header "Name: value" (repeatable)', [])
    .description('show which API would serve a request, the upstream URL after rewriting, and why other routes lost')
    .action(
      withContext(async (ctx, method: string, path: string, options: { host?: string; header: string[] }) => {
        const body = { method, path, ...(options.host ? { host: options.host } : {}), headers: headerPairs(options.header) };
        const { body: explanation } = await request(await ctx.connection(), 'POST', '/explain', body);
        if (ctx.output === 'table') printExplanation(explanation as Row);
        else print(ctx.output, explanation);
      }),
    );
}
