/**
 * Janus names (`[A-Za-z0-9._-]{1,128}`) → Kubernetes `metadata.name` (DNS-1123 subdomain: lower-case
 * alphanumerics, `-` and `.`, alphanumeric at both ends, at most 253 characters).
 *
 * | Janus name (spec.name) | metadata.name                  | rule                                              |
 * |------------------------|--------------------------------|---------------------------------------------------|
 * | `payments`             | `payments`                     | already a valid, lower-case name: kept as is      |
 * | `Payments_V2`          | `payments-v2-1f3a09c2`         | lower-cased, other characters → `-`, plus 8 hex   |
 * | `-x-`                  | `x-5e2b8d1c`                   | of sha256(name), so two names never share a CR    |
 *
 * The mapping is not reversible, so the Janus name always lives in `spec.name`; the store indexes
 * CRs by it, and a second CR claiming a taken name is rejected (Accepted=False). A CR without
 * `spec.name` (written by hand) is named by its metadata.name.
 */
import { createHash } from 'node:crypto';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function metadataNameFor(name: string): string {
  if (DNS_SUBDOMAIN.test(name) && !name.includes('..')) return name;
  const base = name
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  const suffix = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return base === '' ? suffix : `${base}-${suffix}`;
}
