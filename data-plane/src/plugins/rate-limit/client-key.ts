/**
 * Who a request is counted as. `ip`: the client's address (../client-ip.ts). `token`: a SHA-256 of
 * the Authorization credentials (never the credentials themselves), the address when there are none.
 */
import { hash as digest } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { clientAddress, type TrustedProxies } from '../client-ip.js';

/** `Bearer abc` and `bearer  abc` are one credential: the scheme and spacing do not make a new client. */
const CREDENTIALS = /^\s*\S+\s+(\S+)\s*$/;

export function clientKey(req: IncomingMessage, key: 'ip' | 'token', trusted: TrustedProxies): string {
  if (key === 'token') {
    const credentials = CREDENTIALS.exec(req.headers.authorization ?? '')?.[1];
    if (credentials) return `token:${digest('sha256', credentials, 'base64url')}`;
  }
  return `ip:${clientAddress(req, trusted)}`;
}
