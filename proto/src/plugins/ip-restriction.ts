/**
 * ip_restriction (Kong's ip-restriction; Janus has none): `allow` and `deny`, lists of IPv4 and IPv6
 * addresses and CIDR ranges ("10.0.0.0/8", "2001:db8::/32", "192.0.2.7"). The client's address is the data
 * plane's (TRUSTED_PROXIES, data-plane/src/plugins/client-ip.ts); `trust_forward_headers` is still accepted so
 * stored definitions load, and has no effect. A client is refused when its address is in `deny`, or when `allow`
 * lists anything and it is not in it; at least one of the lists must. Entries are stored canonical (canonicalEntry).
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';

export interface IpRange {
  /** Canonical: IPv4 dotted quad, IPv6 as the URL standard writes it (lower case, zeros compressed). */
  address: string;
  /** Prefix length; the whole address (32 or 128) for a single address. */
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * IPv6 through the WHATWG URL host parser (pure, and what it accepts is exactly RFC 4291's text forms,
 * no zone ids): node:net's isIP would do, but plugin configs compile without node:net
 * (test/architecture.test.ts).
 */
function canonicalAddress(text: string): Pick<IpRange, 'address' | 'family'> | null {
  if (IPV4.test(text)) return { address: text, family: 'ipv4' };
  if (!/^[0-9a-f:.]+$/i.test(text) || !text.includes(':')) return null;
  try {
    const host = new URL(`http://[${text}]/`).hostname;
    return { address: host.slice(1, -1), family: 'ipv6' };
  } catch {
    return null;
  }
}

/** `"10.0.0.0/8"` → { address: "10.0.0.0", prefix: 8, family: "ipv4" }; null when it is neither an address nor a range. */
export function parseIpRange(text: string): IpRange | null {
  const slash = text.indexOf('/');
  const parsed = canonicalAddress(slash === -1 ? text : text.slice(0, slash));
  if (!parsed) return null;
  const bits = parsed.family === 'ipv4' ? 32 : 128;
  const prefixText = slash === -1 ? String(bits) : text.slice(slash + 1);
  if (!/^(0|[1-9]\d{0,2})$/.test(prefixText) || Number(prefixText) > bits) return null;
  return { ...parsed, prefix: Number(prefixText) };
}

/**
 * The stored form: trimmed, the address canonical (`2001:DB8:0::1` → `2001:db8::1`), and an IPv4-mapped
 * IPv6 entry (`::ffff:10.0.0.1`, `/120`) as its IPv4 form (`10.0.0.1`, `/24`), since clients on a
 * dual-stack socket are matched by their IPv4 address. Text that is no entry is kept, to be refused.
 */
function canonicalEntry(text: string): string {
  let entry = text.trim().toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)(?:\/(\d{1,3}))?$/.exec(entry);
  if (mapped && (mapped[2] === undefined || Number(mapped[2]) >= 96)) entry = mapped[2] === undefined ? mapped[1]! : `${mapped[1]}/${Number(mapped[2]) - 96}`;
  const range = parseIpRange(entry);
  if (!range) return entry;
  return entry.includes('/') ? `${range.address}/${range.prefix}` : range.address;
}

const entries = z
  .array(
    z
      .string()
      .transform(canonicalEntry)
      .refine((s) => parseIpRange(s) !== null, 'must be an IP address or a CIDR range such as "10.0.0.0/8" or "2001:db8::/32"'),
  )
  .max(1000, 'must not list more than 1000 entries')
  .default([]);

const schema = z
  .object({ allow: entries, deny: entries, trust_forward_headers: z.boolean().default(false) })
  .refine((c) => c.allow.length + c.deny.length > 0, 'must list at least one address or range in "allow" or "deny"');

/**
 * An address as four 32-bit words of its IPv6 form, an IPv4 address as IPv4-mapped (`::ffff:a.b.c.d`),
 * so one comparison serves both families; null when the text is no address. Per request, so by hand:
 * node:net's BlockList costs many times as much per check.
 */
export function addressWords(text: string): Words | null {
  if (!text.includes(':')) {
    const v4 = ipv4Word(text);
    return v4 === null ? null : [0, 0, 0xffff, v4];
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groups = (part: string): number[] | null => {
    if (part === '') return [];
    const out: number[] = [];
    const pieces = part.split(':');
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i]!;
      if (i === pieces.length - 1 && piece.includes('.')) {
        const v4 = ipv4Word(piece);
        if (v4 === null) return null;
        out.push(v4 >>> 16, v4 & 0xffff);
      } else {
        if (!/^[0-9a-f]{1,4}$/i.test(piece)) return null;
        out.push(parseInt(piece, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  return [((all[0]! << 16) | all[1]!) >>> 0, ((all[2]! << 16) | all[3]!) >>> 0, ((all[4]! << 16) | all[5]!) >>> 0, ((all[6]! << 16) | all[7]!) >>> 0];
}

type Words = [number, number, number, number];

function ipv4Word(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let word = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return null;
    word = word * 256 + Number(part);
  }
  return word;
}

/** A range in the IPv6 space of addressWords: an IPv4 /p is the IPv4-mapped /96+p. */
export interface WordRange {
  words: Words;
  prefix: number;
}

/** True when `address` (addressWords) lies in one of `ranges`. */
export function inRanges(address: Words, ranges: readonly WordRange[]): boolean {
  for (const range of ranges) {
    let bits = range.prefix;
    let inside = true;
    for (let i = 0; i < 4 && bits > 0; i++, bits -= 32) {
      const mask = bits >= 32 ? 0xffffffff : (0xffffffff << (32 - bits)) >>> 0;
      if (((address[i]! ^ range.words[i]!) & mask) >>> 0 !== 0) {
        inside = false;
        break;
      }
    }
    if (inside) return true;
  }
  return false;
}

export interface CompiledIpRestriction {
  allow: readonly WordRange[];
  deny: readonly WordRange[];
}

/** A canonical entry (parseIpRange accepts it) as a WordRange. */
export const wordRange = (entry: string): WordRange => {
  const { address, prefix, family } = parseIpRange(entry)!;
  return { words: addressWords(address)!, prefix: family === 'ipv4' ? 96 + prefix : prefix };
};

export const ipRestrictionPlugin = definePlugin({
  schema,
  compile: (c): CompiledIpRestriction => deepFreeze({ allow: c.allow.map(wordRange), deny: c.deny.map(wordRange) }),
});
