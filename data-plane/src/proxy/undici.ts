/**
 * The parts of undici a data plane uses, loaded from undici's own files. Its index also loads fetch,
 * WebSocket, cookies, caches, mocks and, through them, Node's bundled undici: ~60 ms of every data
 * plane start, a tenth of a 10-API cold sync (CPU profile of the bundle), for none of which a data
 * plane has a use. The package has no exports map, so these paths are importable; the types are the
 * public ones (undici-parts.d.ts), and a moved file fails the build (the bundle cannot resolve it).
 */
import DispatcherBase from 'undici/lib/dispatcher/dispatcher.js';
import PoolClass from 'undici/lib/dispatcher/pool.js';
import api from 'undici/lib/api/index.js';
import errorsModule from 'undici/lib/core/errors.js';
import coreUtil from 'undici/lib/core/util.js';

// What undici's index does: request(), stream() and the rest are Dispatcher methods (the introspector calls pool.request).
Object.assign(DispatcherBase.prototype, api);

export const Pool = PoolClass;
export type Pool = InstanceType<typeof PoolClass>;
export const errors = errorsModule;
export const { headerNameToString } = coreUtil;
