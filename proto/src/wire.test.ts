/**
 * wire.ts is generated from gatehouse.proto (scripts/generate-wire-types.mjs): the committed file must be
 * what the .proto generates now, so a changed message cannot leave the services' types behind.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

test('proto/src/wire.ts is what gatehouse.proto generates (npm run generate)', () => {
  const run = spawnSync(process.execPath, ['scripts/generate-wire-types.mjs', '--check'], { cwd: root, encoding: 'utf8' });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
});
