/**
 * The forwarded request of docs/proxy.md "Proxy behaviour": which origin, which path and query, which Host header.
 * Pure; the only error is GatehouseError BAD_UPSTREAM_HOST from target substitution.
 *
 * | strip | append | upstream path                                   |
 * |-------|--------|-------------------------------------------------|
 * | no    | no     | T when T is neither '' nor '/', else R (rule 9) |
 * | no    | yes    | T joined with R (rule 12)                       |
 * | yes   | either | T joined with R minus L (rules 10, 11)          |
 *
 * Rule 11 ("the first occurrence of each `/`-section of listen_path and of each captured value is
 * removed") is R minus L: the sections are removed in order and each first occurrence is at the
 * start of what is left, so removing them one by one removes exactly the matched prefix L.
 */
import { resolveTarget } from '../compile/index.js';
import type { CompiledTarget } from '../compile/index.js';
import type { RouteMatch, UpstreamTarget } from './index.js';

/** Join two path parts with exactly one `/` between them; '' becomes `/`. */
export function joinPaths(a: string, b: string): string {
  let joined: string;
  if (a === '') joined = b;
  else if (b === '') joined = a;
  else if (a.endsWith('/') && b.startsWith('/')) joined = a + b.slice(1);
  else if (a.endsWith('/') || b.startsWith('/')) joined = a + b;
  else joined = `${a}/${b}`;
  return joined === '' ? '/' : joined;
}

/** R minus L, L being the matched listen_path part (a prefix of R by construction). */
export function stripMatched(path: string, matched: string): string {
  return path.startsWith(matched) ? path.slice(matched.length) : path;
}

export function rewrite(match: RouteMatch, target: CompiledTarget, request: { path: string; query: string; host: string | undefined }): UpstreamTarget {
  const { proxy } = match.route;
  const t = resolveTarget(target.plan, match.params, target.hostPattern);
  const r = request.path || '/';

  let path: string;
  if (proxy.strip_path) path = joinPaths(t.path, stripMatched(r, match.matched));
  else if (proxy.append_path) path = joinPaths(t.path, r);
  else path = t.path === '' || t.path === '/' ? r : t.path;

  const query = t.query === '' ? request.query : request.query === '' ? t.query : `${t.query}&${request.query}`;
  return {
    origin: t.origin,
    path: query ? `${path}?${query}` : path,
    host: proxy.preserve_host && request.host ? request.host : t.host,
  };
}
