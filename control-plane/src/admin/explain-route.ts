/**
 * POST /explain: which route the current snapshot gives a request, and why the others lost,
 * computed by the data plane's own routing code (proto/src/routing) on the snapshot this control
 * plane serves. The store state is the snapshot's content (its revision is the snapshot version);
 * it goes through the snapshot codec and compileAllOrThrow exactly as a data plane applies it, once
 * per snapshot hash. Nothing is forwarded and no plugin runs.
 */
import { Router } from 'express';
import { z } from 'zod';
import { compileAllOrThrow } from '#proto/compile/index';
import { HTTP_TOKEN, hostSchema } from '#proto/definition/proxy-schema';
import { parseOrThrow } from '#proto/definition/field-path';
import { buildRoutingTable, explainRequest, type ExplainTables } from '#proto/routing/index';
import { fromSnapshotMessage, toSnapshotMessage } from '#proto/snapshot/codec';
import type { DefinitionStore, StoreState } from '../store/index.js';
import { requireObject } from './definition-writes.js';
import { methodNotAllowed } from './error-handler.js';

export const EXPLAIN_PATH = '/explain';

export const explainBodySchema = z.object({
  method: z.string().regex(HTTP_TOKEN, 'must be an HTTP method'),
  /** The Host header; when absent, `headers.host` (any case) stands in. */
  host: hostSchema.optional(),
  path: z.string().startsWith('/', 'must start with /'),
  /** The request's headers: Host (when `host` is absent) and those of header conditions. */
  headers: z.record(z.string(), z.string()).optional(),
});

export type ExplainBody = z.output<typeof explainBodySchema>;

/** The body's headers as node gives a request's: names lower-cased, one name given in several cases joined with ", ". */
function requestHeaders(body: ExplainBody): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(body.headers ?? {})) {
    const lower = name.toLowerCase();
    headers[lower] = headers[lower] === undefined ? value : `${headers[lower]}, ${value}`;
  }
  return headers;
}

/** The snapshot's routing tables as a data plane builds them (sync/snapshot-holder.ts). */
function tablesOf(state: StoreState): ExplainTables {
  const compiled = compileAllOrThrow(fromSnapshotMessage(toSnapshotMessage(state.revision, state.defs, state.hash)).defs);
  return { active: buildRoutingTable(compiled.routes), inactive: buildRoutingTable(compiled.inactiveRoutes) };
}

export function createExplainRoutes(store: Pick<DefinitionStore, 'current'>): Router {
  let built: { hash: string; tables: ExplainTables } | null = null;
  const tablesFor = (state: StoreState): ExplainTables => {
    if (built?.hash !== state.hash) built = { hash: state.hash, tables: tablesOf(state) };
    return built.tables;
  };

  const router = Router();
  router
    .route(EXPLAIN_PATH)
    .post((req, res) => {
      const body = parseOrThrow(explainBodySchema, requireObject(req.body));
      const state = store.current();
      const headers = requestHeaders(body);
      const explanation = explainRequest(tablesFor(state), { method: body.method, host: body.host ?? headers.host, path: body.path, headers });
      res.json({ snapshot: { version: state.revision, hash: state.hash }, ...explanation });
    })
    .all(methodNotAllowed(['POST']));
  return router;
}
