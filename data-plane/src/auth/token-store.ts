/**
 * Token store of the storage strategy: Redis (REDIS_URL, shared by DP replicas) or in-process.
 * OWNER: auth helper. Interface is a contract.
 */
export interface TokenStore {
  /** Stores a token for a server with a TTL in seconds. */
  put(server: string, token: string, ttlSeconds: number): Promise<void>;
  /** true when stored and not expired. Rejects when the backend is unreachable (callers fail closed). */
  has(server: string, token: string): Promise<boolean>;
  delete(server: string, token: string): Promise<void>;
  /** Remember which access token a refresh token belongs to, so a refresh grant can replace it. */
  linkRefresh(server: string, refreshToken: string, accessToken: string, ttlSeconds: number): Promise<void>;
  /** Access token linked to a refresh token, or null. */
  accessForRefresh(server: string, refreshToken: string): Promise<string | null>;
  deleteRefresh(server: string, refreshToken: string): Promise<void>;
  close(): Promise<void>;
}
