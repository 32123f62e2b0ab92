/**
 * Admin password and token-signing secret: from the environment when set, otherwise generated
 * once into DATA_DIR (mode 0600) and reused on every restart. Only file paths are logged.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '#proto/logger';
import { createFileAtomic } from '../store/atomic-file.js';

export interface AdminSecrets {
  password: string;
  jwtSecret: string;
}

export interface AdminSecretSources {
  adminPassword: string | undefined;
  adminPasswordFile: string;
  adminJwtSecret: string | undefined;
  adminJwtSecretFile: string;
}

/** Reads the secret in `path`, creating it with `generate()` when absent. */
export async function readOrCreateSecret(path: string, generate: () => string): Promise<{ value: string; created: boolean }> {
  let created = false;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    // DATA_DIR may not exist yet: the file store creates it, the Kubernetes store has no other use for it.
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    // Another starter may win the race: then its value is the one both use.
    created = await createFileAtomic(path, `${generate()}\n`, 0o600);
    text = await readFile(path, 'utf8');
  }
  const value = text.trim();
  if (!value) throw new Error(`${path} is empty; delete it to generate a new secret`);
  return { value, created };
}

export const strongSecret = () => randomBytes(32).toString('base64url');

export async function resolveAdminSecrets(sources: AdminSecretSources, logger: Logger): Promise<AdminSecrets> {
  let password = sources.adminPassword;
  if (password === undefined) {
    const { value, created } = await readOrCreateSecret(sources.adminPasswordFile, strongSecret);
    password = value;
    // SPEC: the location is printed at start-up, so a generated one is a warning (seen at LOG_LEVEL=warn too).
    if (created) logger.warn({ path: sources.adminPasswordFile }, 'generated admin password written to file');
    else logger.info({ path: sources.adminPasswordFile }, 'admin password read from file');
  }
  let jwtSecret = sources.adminJwtSecret;
  if (jwtSecret === undefined) {
    const { value, created } = await readOrCreateSecret(sources.adminJwtSecretFile, strongSecret);
    jwtSecret = value;
    logger.info({ path: sources.adminJwtSecretFile }, created ? 'generated admin token secret written to file' : 'admin token secret read from file');
  } else if (Buffer.byteLength(jwtSecret) < 32) {
    logger.warn('ADMIN_JWT_SECRET is shorter than 32 bytes; use a longer random secret');
  }
  return { password, jwtSecret };
}
