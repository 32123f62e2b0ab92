/** Load through a data plane's proxy listener from this process: `requests` GETs of `path`, `concurrency` at a time, each expected to answer 200. */
import { Pool } from 'undici';

export async function loadThrough(proxyUrl: string, path: string, requests: number, concurrency = 16): Promise<void> {
  const pool = new Pool(proxyUrl, { connections: concurrency });
  let sent = 0;
  const worker = async (): Promise<void> => {
    while (sent < requests) {
      sent++;
      const { statusCode, body } = await pool.request({ method: 'GET', path });
      await body.dump();
      expect(statusCode).toBe(200);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await pool.close();
  }
}
