/**
 * The content hash: sha256 hex over one line per kind, `<kind> <count> <sum>\n` in the order apis,
 * oauth_servers, basic_auth_credentials, key_auth_credentials (that one only when there are any, so
 * every configuration without API keys keeps the hash it had before the kind existed, and control
 * and data planes of both releases agree on it during an upgrade), where sum is the sum of that kind's
 * definition hashes (sha256 of the canonical message's JSON, messages.ts) as 256-bit numbers modulo 2^256
 * (64 hex digits): it names the whole content whatever the list order, is the same on every replica, and a
 * change of k definitions updates it in O(k) from the previous one (deriveDefinitions) instead of
 * re-hashing every definition's hash per push.
 * Why a sum is enough: the hash is compared to detect that two sides hold different content (a lost
 * or misapplied delta, a stale cache file), not to resist someone choosing definitions to collide on
 * purpose (anyone who can write definitions controls the content anyway). Names are unique per kind,
 * so the content is a set of distinct sha256 values; two different sets have the same count and sum
 * with probability about 2^-256 for content not chosen to collide (a multiset hash, Bellare and
 * Micciancio's AdHash), and kinds are summed apart.
 * Hashes are memoised by object identity, as messages are.
 */
import { hash as digest } from 'node:crypto';
import type { Definitions } from '../definition/types.js';
import { allTurns } from '../turns.js';
import { gatewayTlsDigest, type GatewayListenerTls } from './gateway-tls.js';
import { KIND_CODECS, KIND_INDEX, KIND_KEYS, type ContentChange, type KindCodec } from './kinds.js';
import { memoisedMessage } from './messages.js';

/** The definition hashes kept (keepDefinitionHashes). */
const hashes = new WeakMap<object, bigint>();

/**
 * Whether definitionHash keeps each hash it computes (keepDefinitionHashes). A control plane hashes the same
 * definition many times (the diff of a delta compares both sides' hashes, a configuration nobody derived is hashed
 * whole); a data plane hashes each one when it arrives and once more when an edit replaces or removes it, a few µs
 * then, so it keeps none and saves the hash and its WeakMap entry per API.
 */
let keepHashes = true;

/** Set once at start by a process that hashes each definition about twice (the data plane): see keepHashes. */
export function keepDefinitionHashes(keep: boolean): void {
  keepHashes = keep;
}

/** The definition's sha256 as a number (what the whole hash sums; 48 bytes held where its hex took 80). */
export function definitionHash<D extends object>(def: D, toMessage: (def: D) => object): bigint {
  let hash = hashes.get(def);
  if (hash !== undefined) return hash;
  // One-shot crypto.hash: about half the time of createHash().update().digest().
  hash = BigInt(`0x${digest('sha256', JSON.stringify(memoisedMessage(def) ?? toMessage(def)), 'hex')}`);
  if (keepHashes) hashes.set(def, hash);
  return hash;
}

/** Per kind (KIND_KEYS order): how many definitions and the sum of their hashes; the whole hash names these. */
interface HashSums {
  hash: string;
  counts: number[];
  sums: bigint[];
}

/** Per Definitions object (also never mutated): the store, the history and the snapshot builder hash the same one. */
const wholeHashes = new WeakMap<Definitions, HashSums>();

/** A definition added (`before` absent), replaced, or removed (`after` absent). */
export interface DefinitionEdit {
  kind: ContentChange['kind'];
  before?: object;
  after?: object;
}

/** next → the Definitions it was made from (weakly: a chain of versions must not keep each other alive) and how. */
const derivations = new WeakMap<Definitions, { base: WeakRef<Definitions>; edits: readonly DefinitionEdit[] }>();

/**
 * Records that `next` is `base` with `edits` made and nothing else (the caller built it so, each
 * definition edited at most once): definitionsHash(next) is then derived from base's in O(edits), and
 * toDeltaMessage(base, next) takes the edits instead of comparing the whole lists.
 */
export function deriveDefinitions(base: Definitions, next: Definitions, edits: readonly DefinitionEdit[]): void {
  derivations.set(next, { base: new WeakRef(base), edits });
}

/** The edits that made `next` from `base` (deriveDefinitions), or null when it was not recorded so. */
export function editsFrom(base: Definitions, next: Definitions): readonly DefinitionEdit[] | null {
  const derivation = derivations.get(next);
  return derivation && derivation.base.deref() === base ? derivation.edits : null;
}

function sealed(counts: number[], sums: bigint[]): HashSums {
  const wrapped = sums.map((sum) => BigInt.asUintN(256, sum));
  const lines = KIND_KEYS.flatMap((key, i) =>
    counts[i] === 0 && (KIND_CODECS[key] as KindCodec<object>).unhashedWhenEmpty ? [] : [`${key} ${counts[i]} ${wrapped[i].toString(16).padStart(64, '0')}\n`],
  );
  return { hash: digest('sha256', lines.join(''), 'hex'), counts, sums: wrapped };
}

/** Each kind's count and sum of definition hashes, yielding after every `turn` definitions hashed. */
function* sumsOfInTurns(defs: Definitions, turn = Infinity): Generator<void, HashSums> {
  const derivation = derivations.get(defs);
  const base = derivation?.base.deref();
  const from = base && wholeHashes.get(base);
  let done = 0;
  if (from) {
    const counts = [...from.counts];
    const sums = [...from.sums];
    for (const { kind, before, after } of derivation!.edits) {
      const i = KIND_INDEX[kind];
      const codec = KIND_CODECS[KIND_KEYS[i]] as KindCodec<object>;
      if (before) {
        counts[i]--;
        sums[i] -= definitionHash(before, codec.toRawMessage);
      }
      if (after) {
        counts[i]++;
        sums[i] += definitionHash(after, codec.toRawMessage);
      }
      if (++done % turn === 0) yield;
    }
    return sealed(counts, sums);
  }
  const counts: number[] = [];
  const sums: bigint[] = [];
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const list = codec.list(defs);
    let sum = 0n;
    for (const def of list) {
      sum += definitionHash(def, codec.toRawMessage);
      if (++done % turn === 0) yield;
    }
    counts.push(list.length);
    sums.push(sum);
  }
  return sealed(counts, sums);
}

/**
 * The hash a snapshot names: the definitions' hash, and when the snapshot carries the key_auth installation key
 * (exactly when it has key_auth credentials) that key's digest too, so a change of that key alone is a change of
 * content (a data plane holding the old one is sent the whole snapshot, its cache file no longer matches), and a
 * configuration without API keys keeps the hash it had before the key existed. Gateway HTTPS listeners
 * (gateway-tls.ts) are covered the same way: a line when there are any, so a rotated certificate is new content.
 */
export function contentHash(defsHash: string, keyAuthHashKey: string | undefined, gatewayTls?: readonly GatewayListenerTls[]): string {
  const key = keyAuthHashKey ? `key_auth_hash_key ${digest('sha256', keyAuthHashKey, 'hex')}\n` : '';
  const tls = gatewayTls?.length ? `gateway_tls ${gatewayTlsDigest(gatewayTls)}\n` : '';
  if (!key && !tls) return defsHash;
  return digest('sha256', `${defsHash}\n${key}${tls}`, 'hex');
}

/** sha256 hex over each kind's count and sum of definition hashes (see the file comment). */
export function definitionsHash(defs: Definitions): string {
  return allTurns(definitionsHashInTurns(defs));
}

/** definitionsHash, yielding after every `turn` definitions hashed (a serving data plane's large push). */
export function* definitionsHashInTurns(defs: Definitions, turn = Infinity): Generator<void, string> {
  let known = wholeHashes.get(defs);
  if (!known) wholeHashes.set(defs, (known = yield* sumsOfInTurns(defs, turn)));
  return known.hash;
}
