/**
 * Asserts that a plugin configuration is refused with 400 and `message`, both when an API is
 * created with it and when an existing API is updated to it, and that the store is unchanged
 * (the new API does not exist, the existing one reads as before).
 */
import type { Gateway } from './start-gateway.js';

export async function expectRefusedPluginConfig(
  gw: Gateway,
  refused: { definition: Record<string, unknown>; existing: string; plugins: unknown[] },
  message: string,
): Promise<void> {
  const created = await gw.admin.createApi({ ...refused.definition, plugins: refused.plugins });
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: message });
  expect((await gw.admin.getApi(String(refused.definition.name))).status).toBe(404);

  const before = await gw.admin.getApi(refused.existing);
  const updated = await gw.admin.updateApi(refused.existing, { plugins: refused.plugins });
  expect(updated.status).toBe(400);
  expect(updated.body).toEqual({ error: message });
  expect((await gw.admin.getApi(refused.existing)).body).toEqual(before.body);
}
