/** Build stage of the pipeline: applied snapshot content → the immutable serving table every request reads. */
export { createTableBuilder, type BuiltTable, type DeltaBase, type TableBasis, type TableBuilder, type TableDeps } from './build.js';
export { prepareInTurns, type Prepared } from './prepare.js';
export { RouteUpstreams, type RouteUpstream, type ServingTable, type TableSource } from './serving-table.js';
export { buildGatewayTls, type GatewayTlsContexts } from './gateway-tls.js';
