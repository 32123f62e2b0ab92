/**
 * response_transformer (config: proto/src/plugins/header-transformer.ts): edits the upstream's
 * response headers before they are written, in Janus's order remove → replace → add → append.
 * The gateway's own answers and errors are not transformed.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { CompiledHeaderEdits, CompiledResponseTransformer } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

/** Edits `headers` (lower-case names) in place. */
export function editResponseHeaders(headers: OutgoingHttpHeaders, edits: CompiledHeaderEdits): void {
  for (const name of edits.remove) delete headers[name];
  for (const r of edits.replace) if (headers[r.lower] !== undefined) headers[r.lower] = r.value;
  for (const a of edits.add) if (headers[a.lower] === undefined) headers[a.lower] = a.value;
  for (const a of edits.append) {
    const previous = headers[a.lower];
    if (previous === undefined) headers[a.lower] = a.value;
    else headers[a.lower] = [...(Array.isArray(previous) ? previous : [String(previous)]), a.value];
  }
}

export const responseTransformerRuntime: PluginRuntime<CompiledResponseTransformer> = {
  stage: ({ headers }) => (headers ? { response: (_ex, _status, out) => editResponseHeaders(out, headers) } : {}),
};
