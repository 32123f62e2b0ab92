/**
 * The parts of undici a data plane uses, loaded from undici's own files. Its index also loads fetch,
 * WebSocket, cookies, caches, mocks and, through them, Node's bundled undici: a noticeable share of every
 * data plane start, for none of which a data plane has a use. The package has no exports map, so these paths are importable; each is cast here
 * to the public type of what it exports (undici-parts.d.ts declares the files), and a moved file
 * fails the build (the bundle cannot resolve it).
 */
import type * as Undici from 'undici';
import dispatcherModule from 'undici/lib/dispatcher/dispatcher.js';
import poolModule from 'undici/lib/dispatcher/pool.js';
import apiModule from 'undici/lib/api/index.js';
import errorsModule from 'undici/lib/core/errors.js';
import utilModule from 'undici/lib/core/util.js';
import wrapHandlerModule from 'undici/lib/handler/wrap-handler.js';
import constantsModule from 'undici/lib/core/constants.js';

// What undici's index does: request(), stream() and the rest are Dispatcher methods (the introspector calls pool.request).
Object.assign((dispatcherModule as typeof Undici.Dispatcher).prototype, apiModule as object);

export const Dispatcher = dispatcherModule as typeof Undici.Dispatcher;
export const Pool = poolModule as typeof Undici.Pool;
export type Pool = Undici.Pool;
export const errors = errorsModule as typeof Undici.errors;
export const { headerNameToString, parseHeaders } = utilModule as typeof Undici.util;
/** A handler of undici's older contract (onConnect, onHeaders…), as request() makes, in the current one (undici's own adapter). */
export const wrapHandler = (wrapHandlerModule as { wrap(handler: Undici.Dispatcher.DispatchHandler): Undici.Dispatcher.DispatchHandler }).wrap;

/**
 * Adds lower-case header names to undici's table of well-known ones (constants.js headerNameLowerCasedRecord), which
 * its request checks (core/request.js processHeader) look a name up in first: a name found there is taken as it is,
 * any other is lower-cased and tested against the token grammar on every request. The data plane adds the same few
 * names to every upstream request (headers.ts), all valid tokens and already lower-case, so the table answers for
 * them as for `host`. Nothing else changes: undici's response-header parsing reads names through its own tree.
 */
export function addWellKnownHeaderNames(names: Iterable<string>): void {
  const table = (constantsModule as { headerNameLowerCasedRecord: Record<string, string> }).headerNameLowerCasedRecord;
  for (const name of names) if (/^[a-z0-9-]+$/.test(name)) table[name] ??= name;
}
