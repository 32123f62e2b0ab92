/**
 * request_transformer (config: proto/src/plugins/header-transformer.ts): edits the client's header
 * list and query string before the gateway applies its own header rules, in Janus's order remove →
 * replace → add → append. A target's own query is not edited (it still comes first).
 */
import type { CompiledHeaderEdits, CompiledQueryEdits, CompiledRequestTransformer } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

function firstIndexOf(list: readonly string[], lower: string): number {
  for (let i = 0; i < list.length; i += 2) if (list[i]!.toLowerCase() === lower) return i;
  return -1;
}

/** A raw header list ([name, value, ...]) with the edits applied; the input is not changed. */
export function editHeaderList(raw: readonly string[], edits: CompiledHeaderEdits): string[] {
  let out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!edits.remove.has(raw[i]!.toLowerCase())) out.push(raw[i]!, raw[i + 1]!);
  }
  for (const r of edits.replace) {
    const first = firstIndexOf(out, r.lower);
    if (first === -1) continue;
    const next: string[] = [];
    for (let i = 0; i < out.length; i += 2) {
      if (i === first) next.push(r.name, r.value);
      else if (out[i]!.toLowerCase() !== r.lower) next.push(out[i]!, out[i + 1]!);
    }
    out = next;
  }
  for (const a of edits.add) if (firstIndexOf(out, a.lower) === -1) out.push(a.name, a.value);
  for (const a of edits.append) out.push(a.name, a.value);
  return out;
}

interface QueryPair {
  /** Decoded name. */
  name: string;
  /** `name=value` as received (or as compiled). */
  raw: string;
}

function decodedName(raw: string): string {
  const eq = raw.indexOf('=');
  const name = (eq === -1 ? raw : raw.slice(0, eq)).replace(/\+/g, ' ');
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
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
  stage: ({ headers, query }) => ({
    request(ex) {
      if (headers) ex.headers = editHeaderList(ex.headers, headers);
      if (query) ex.query = editQuery(ex.query, query);
    },
  }),
};
