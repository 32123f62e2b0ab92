/**
 * A real headless Chromium (Debian package `chromium`) driven by playwright-core, for the web console
 * tests. Missing browser = a loud failure with install instructions, never a silent skip. Screenshots
 * go to a directory outside the repository (GATEHOUSE_TEST_ARTIFACTS, default $TMPDIR/gatehouse-test-artifacts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/** CHROMIUM_BIN (a path or a name on the PATH), else the first of the Debian names found on the PATH. */
const CANDIDATES = process.env.CHROMIUM_BIN ? [process.env.CHROMIUM_BIN] : ['chromium', 'chromium-browser', 'google-chrome'];

function onPath(name: string): string | undefined {
  if (isAbsolute(name)) return name;
  return (process.env.PATH ?? '')
    .split(delimiter)
    .map((dir) => join(dir, name))
    .find((file) => existsSync(file));
}

export function findChromium(): string | undefined {
  for (const name of CANDIDATES) {
    const file = onPath(name);
    if (file && spawnSync(file, ['--version'], { stdio: 'ignore' }).status === 0) return file;
  }
  return undefined;
}

/** The browser's path; throws with install instructions when there is none (in CI and elsewhere alike). */
export function requireChromium(): string {
  const file = findChromium();
  if (!file) {
    throw new Error(
      `chromium not found (looked for ${CANDIDATES.join(', ')} on the PATH${process.env.CI === 'true' ? ', CI=true' : ''}): ` +
        'install it with `apt-get install -y chromium` (.ci/run does this) or set CHROMIUM_BIN to a Chromium/Chrome binary',
    );
  }
  return file;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: requireChromium(),
    headless: true,
    // --no-sandbox: the tests run as root in CI containers, where Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

/** A fresh directory for one suite's screenshots, outside the repository. */
export async function screenshotDir(suite: string): Promise<string> {
  const dir = join(process.env.GATEHOUSE_TEST_ARTIFACTS ?? join(tmpdir(), 'gatehouse-test-artifacts'), suite);
  await mkdir(dir, { recursive: true });
  return dir;
}
