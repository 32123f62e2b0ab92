// The npm mirror reachable here serves only linux builds, so `npm install` leaves other platforms'
// optional bindings (e.g. @unrs/resolver-binding-*) out of package-lock.json and `npm ci` then refuses
// the lock. This adds those entries with their os/cpu, so `npm ci` skips them. Run after changing deps.
import { readFileSync, writeFileSync } from 'node:fs';
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const pk = lock.packages;
const platform = (name) => {
  const s = name.split('/').pop();
  const os = ['android', 'darwin', 'freebsd', 'linux', 'openharmony', 'win32', 'wasm32'].find((o) => s.includes(o));
  const cpu = ['arm64', 'arm', 'x64', 'ia32', 'loong64', 'ppc64', 'riscv64', 's390x', 'wasm32'].find((c) => s.includes(`-${c}`));
  return { os, cpu };
};
let added = 0;
for (const [path, meta] of Object.entries(pk)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const key = `node_modules/${dep}`;
    if (pk[key] || pk[`${path}/node_modules/${dep}`]) continue;
    const { os, cpu } = platform(dep);
    pk[key] = { version, dev: meta.dev, optional: true, ...(cpu ? { cpu: [cpu] } : {}), ...(os && os !== 'wasm32' ? { os: [os] } : {}) };
    added++;
  }
}
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log('added', added);
