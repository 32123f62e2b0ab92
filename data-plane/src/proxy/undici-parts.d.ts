// Types of the undici files data-plane/src/proxy/undici.ts loads: each is the public type of what it exports.
declare module 'undici/lib/dispatcher/dispatcher.js' {
  const Dispatcher: typeof import('undici').Dispatcher;
  export default Dispatcher;
}
declare module 'undici/lib/dispatcher/pool.js' {
  const Pool: typeof import('undici').Pool;
  export default Pool;
}
declare module 'undici/lib/api/index.js' {
  const api: Pick<import('undici').Dispatcher, 'request' | 'stream' | 'pipeline' | 'upgrade' | 'connect'>;
  export default api;
}
declare module 'undici/lib/core/errors.js' {
  const errors: typeof import('undici').errors;
  export default errors;
}
declare module 'undici/lib/core/util.js' {
  const util: typeof import('undici').util;
  export default util;
}
