/**
 * Global credentials (`/credentials/basic_auth`, `/credentials/key_auth`) in tests: each test creates
 * its own, and this runs after each, so every test starts with none, whatever ran before it.
 */
import type { AdminClient } from './admin-client.js';

/** Deletes every credential listed at `collection` (204 each) and checks that none is left. */
export async function deleteAllCredentials(admin: AdminClient, collection: string): Promise<void> {
  for (const { username } of (await admin.request('GET', collection)).body as Array<{ username: string }>) {
    expect((await admin.request('DELETE', `${collection}/${encodeURIComponent(username)}`)).status).toBe(204);
  }
  expect((await admin.request('GET', collection)).body).toEqual([]);
}
