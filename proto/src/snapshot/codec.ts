/**
 * Snapshot codec, the entry of proto/src/snapshot/: Definitions <-> the typed protobuf Snapshot message, the
 * SnapshotDelta between two versions, and the content hash over a canonical encoding (so a reordering of the
 * store is not a change).
 *   - messages.ts: each definition's canonical message and back (the wire conventions);
 *   - kinds.ts: one codec per definition kind, in the order everything goes over them;
 *   - hash.ts: the content hash, a sum of definition hashes updated per edit;
 *   - deltas.ts: the delta between two versions, and applying one to the held lists;
 *   - here: a whole snapshot, encoded and decoded.
 * What a serving data plane receives (a full snapshot, a large delta) can be decoded, validated and hashed in
 * turns (the *InTurns generators, run by snapshot-holder.ts), so requests run between them.
 */
import { GatehouseError } from '../errors.js';
import type { Definitions } from '../definition/types.js';
import { allTurns } from '../turns.js';
import { contentHash, definitionsHash, definitionsHashInTurns } from './hash.js';
import { KIND_CODECS, KIND_KEYS, type KindCodec, type SnapshotContent } from './kinds.js';
import type { DefinitionList, SnapshotMessage } from './messages.js';
import { canonicalGatewayTls, gatewayTlsFromMessage, type GatewayListenerTls } from './gateway-tls.js';

export { apiMessage, oauthServerMessage, type OAuthServerMessage, type SnapshotMessage } from './messages.js';
export type { ContentChange, SnapshotContent } from './kinds.js';
export { canonicalGatewayTls, sameGatewayTls, tlsContextOf, type GatewayListenerTls } from './gateway-tls.js';
export { contentHash, definitionsHash, deriveDefinitions, editsFrom, keepDefinitionHashes, type DefinitionEdit } from './hash.js';
export { applyDeltaMessage, applyDeltaMessageInTurns, deltaSize, prepareForDeltas, toDeltaMessage, type DeltaMessage } from './deltas.js';

const byName = <T extends { name: string }>(a: T, b: T) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Every kind's messages sorted by name; an optional kind without definitions is left out. */
function canonicalBody(defs: Definitions): Pick<SnapshotMessage, DefinitionList> {
  const body: Partial<Record<DefinitionList, object[]>> = {};
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const list = codec.list(defs);
    if (codec.optional && list.length === 0) continue;
    const named = list.map((def) => ({ name: codec.nameOf(def), def }));
    body[key] = named.sort(byName).map(({ def }) => codec.toMessage(def));
  }
  return body as Pick<SnapshotMessage, DefinitionList>;
}

/** The key_auth installation key a snapshot of `defs` carries: the key when it has key_auth credentials, else none. */
export function carriedHashKey(defs: Definitions, keyAuthHashKey: string | undefined): string | undefined {
  return defs.keyAuthCredentials?.length ? keyAuthHashKey : undefined;
}

/**
 * The content a control plane serves for a store state: `defsHash` is definitionsHash(defs) (the store holds it),
 * `keyAuthHashKey` the installation key, carried (and hashed) only when there are key_auth credentials.
 */
export function snapshotContent(
  version: number,
  defs: Definitions,
  defsHash: string,
  keyAuthHashKey: string | undefined,
  gatewayTls?: readonly GatewayListenerTls[],
): SnapshotContent {
  const key = carriedHashKey(defs, keyAuthHashKey);
  const tls = gatewayTls?.length ? gatewayTls : undefined;
  return { version, hash: contentHash(defsHash, key, tls), defs, ...(key && { keyAuthHashKey: key }), ...(tls && { gatewayTls: tls }) };
}

/**
 * `defsHash`, when the caller already holds definitionsHash(defs) (the store does), is not computed again;
 * `keyAuthHashKey` is carried as carriedHashKey says.
 */
export function toSnapshotMessage(
  version: number,
  defs: Definitions,
  defsHash?: string,
  keyAuthHashKey?: string,
  gatewayTls?: readonly GatewayListenerTls[],
): SnapshotMessage {
  const key = carriedHashKey(defs, keyAuthHashKey);
  const listeners = canonicalGatewayTls(gatewayTls ?? []);
  return {
    version,
    hash: contentHash(defsHash ?? definitionsHash(defs), key, listeners),
    ...(key && { key_auth_hash_key: key }),
    ...(listeners && { gateway_tls: { listeners } }),
    ...canonicalBody(defs),
  };
}

/**
 * Inverse of toSnapshotMessage; throws VALIDATION_FAILED on a message that does not describe valid
 * definitions (each one re-validated) or whose hash does not match its content.
 */
export function fromSnapshotMessage(msg: SnapshotMessage): SnapshotContent {
  return allTurns(fromSnapshotMessageInTurns(msg));
}

/**
 * fromSnapshotMessage in turns of `turn` definitions (each decoded, validated and hashed), yielding between
 * them: a data plane that serves requests while a full snapshot arrives lets them run between turns
 * (snapshot-holder.ts applyInTurns) instead of pausing them all for the whole.
 */
export function* fromSnapshotMessageInTurns(msg: SnapshotMessage, turn = Infinity): Generator<void, SnapshotContent> {
  let defs: Definitions = { apis: [], oauthServers: [] };
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const items = codec.optional ? (msg[key] ?? []) : msg[key];
    const list = yield* codec.decode(items, msg.decodeDefinition, turn);
    if (!codec.optional || list.length > 0) defs = codec.withList(defs, list);
  }
  // The wire's "" is no key.
  const key = msg.key_auth_hash_key || undefined;
  const gatewayTls = gatewayTlsFromMessage(msg.gateway_tls);
  const hash = contentHash(yield* definitionsHashInTurns(defs, turn), key, gatewayTls);
  if (hash !== msg.hash) {
    throw new GatehouseError('VALIDATION_FAILED', `snapshot hash mismatch: message says ${JSON.stringify(msg.hash)}, content is ${hash}`);
  }
  return { version: Number(msg.version), hash, defs, ...(key && { keyAuthHashKey: key }), ...(gatewayTls && { gatewayTls }) };
}
