/**
 * request_transformer (config: proto/src/plugins/header-transformer.ts): edits the client's header
 * list and query string before the gateway applies its own header rules, in Janus's order remove →
 * replace → add → append. A target's own query is not edited (it still comes first).
 */
import type { CompiledHeaderEdits, CompiledQueryEdits, CompiledRequestTransformer } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

/**
 * A raw header list ([name, value, ...]) with the edits applied; the input is not changed. Each
 * name is lower-cased once (kept alongside in `lower`), not again by every replace and add.
 */
export function editHeaderList(raw: readonly string[], edits: CompiledHeaderEdits): string[] {
  const out: string[] = [];
  const lower: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (edits.remove.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
    lower.push(name);
  }
  for (const r of edits.replace) {
    const first = lower.indexOf(r.lower);
    if (first === -1) continue;
    out[2 * first] = r.name;
    out[2 * first + 1] = r.value;
    for (let j = lower.length - 1; j > first; j--) {
      if (lower[j] !== r.lower) continue;
      out.splice(2 * j, 2);
      lower.splice(j, 1);
    }
  }
  for (const a of edits.add) {
    if (lower.includes(a.lower)) continue;
    out.push(a.name, a.value);
    lower.push(a.lower);
  }
  for (const a of edits.append) out.push(a.name, a.value);
  return out;
}

interface QueryPair {
  /** Decoded name. */
  name: string;
  /** `name=value` as received (or as compiled). */
  raw: string;
}

/** A query component as a form decodes it (`+` is a space); one that does not percent-decode is kept as it is. */
export function decodeQueryComponent(raw: string): string {
  const text = raw.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function decodedName(raw: string): string {
  const eq = raw.indexOf('=');
  return decodeQueryComponent(eq === -1 ? raw : raw.slice(0, eq));
}

/** A raw query string (no '?') with the edits applied; parameters keep their order and encoding. */
export function editQuery(query: string, edits: CompiledQueryEdits): string {
  let pairs: QueryPair[] = query.split('&').flatMap((raw) => (raw === '' ? [] : [{ name: decodedName(raw), raw }]));
  if (edits.remove.size > 0) pairs = pairs.filter((p) => !edits.remove.has(p.name));
  for (const r of edits.replace) {
    const first = pairs.findIndex((p) => p.name === r.name);
    if (first === -1) continue;
    pairs = pairs.flatMap((p, i) => (i === first ? [{ name: r.name, raw: r.pair }] : p.name === r.name ? [] : [p]));
  }
  for (const a of edits.add) if (!pairs.some((p) => p.name === a.name)) pairs.push({ name: a.name, raw: a.pair });
  for (const a of edits.append) pairs.push({ name: a.name, raw: a.pair });
  return pairs.map((p) => p.raw).join('&');
}

export const requestTransformerRuntime: PluginRuntime<CompiledRequestTransformer> = {
  stage: ({ headers, query }) => {
    // A request without a query always ends with the same one: computed here, once per snapshot.
    const fromEmpty = query ? editQuery('', query) : '';
    return {
      request(ex) {
        if (headers) ex.headers = editHeaderList(ex.headers, headers);
        if (query) ex.query = ex.query === '' ? fromEmpty : editQuery(ex.query, query);
      },
    };
  },
};
