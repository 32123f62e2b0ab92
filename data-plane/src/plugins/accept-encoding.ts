/**
 * Content-coding negotiation (RFC 9110 §12.5.3): which of the codings the gateway offers a client's
 * Accept-Encoding asks for. Pure: no I/O, no state.
 *
 * - Each coding's weight is its own entry's q, else the `*` entry's q, else 0 (not acceptable).
 *   `x-gzip` counts as `gzip`. An entry whose q is not a number from 0 to 1 is ignored.
 * - The highest weight above 0 wins; on a tie `br` comes first (it is smaller), then `gzip`.
 * - `identity` only matters when listed by name: a client that weighs it above every offered coding
 *   gets the response as is. `identity;q=0` does not stop compression (it asks for it).
 * - No header, or an empty one: nothing is acceptable but identity.
 */
import type { CompressionEncoding } from '#proto/plugins/index';

export interface OfferedEncodings {
  br: boolean;
  gzip: boolean;
}

const Q_VALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

export function negotiateEncoding(acceptEncoding: string | undefined, offered: OfferedEncodings): CompressionEncoding | null {
  if (!acceptEncoding) return null;
  let br: number | undefined;
  let gzip: number | undefined;
  let any: number | undefined;
  let identity: number | undefined;
  for (const entry of acceptEncoding.split(',')) {
    const [codingPart, ...params] = entry.split(';');
    const coding = codingPart.trim().toLowerCase();
    if (coding === '') continue;
    let q = 1;
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'q') continue;
      const value = param.slice(eq + 1).trim();
      q = Q_VALUE.test(value) ? Number(value) : NaN;
    }
    if (Number.isNaN(q)) continue;
    if (coding === 'br') br = q;
    else if (coding === 'gzip' || coding === 'x-gzip') gzip = Math.max(gzip ?? 0, q);
    else if (coding === '*') any = q;
    else if (coding === 'identity') identity = q;
  }
  const brQ = offered.br ? (br ?? any ?? 0) : 0;
  const gzipQ = offered.gzip ? (gzip ?? any ?? 0) : 0;
  const best = Math.max(brQ, gzipQ);
  if (best === 0 || (identity !== undefined && identity > best)) return null;
  return brQ === best ? 'br' : 'gzip';
}
