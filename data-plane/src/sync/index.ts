/** Apply stage of the pipeline: snapshot messages in, checked, cached and applied; table/ builds what every request reads. */
export { backoffDelay, type BackoffOptions } from './backoff.js';
export { createSnapshotCache, type SnapshotCache } from './snapshot-cache.js';
export { createSnapshotClient, type DataPlaneIdentity, type SnapshotClient } from './snapshot-client.js';
export { createSnapshotHolder, type ApplyResult, type SnapshotHolder } from './snapshot-holder.js';
