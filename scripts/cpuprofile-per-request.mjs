// Reads the .cpuprofile files scripts/profile-per-request.sh wrote and prints, per entry, the main
// thread's sampled time per request by where it went, then the functions whose time per request
// differs most from the first entry's. Not part of the product.
//   node scripts/cpuprofile-per-request.mjs <dir> [<dir> ...]   (each dir: one .cpuprofile and a `requests` file)
import { readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';

const STARTUP = /^internal\/(modules|bootstrap)\/|^(wrapSafe|compileFunction|compileSourceTextModule|internalModuleStat|readFileUtf8|openFileHandle|fstat)$/;
const SOCKET_WRITES = new Set(['writev', 'writeBuffer', 'writeLatin1String', 'writeUtf8String', 'writeAsciiString']);

/** Where a sampled frame's time goes; null for idle. */
function groupOf({ functionName, url }) {
  if (functionName === '(idle)') return null;
  if (STARTUP.test(url.replace(/^node:/, '')) || STARTUP.test(functionName)) return 'module loading (start-up)';
  if (url === '') {
    if (functionName.startsWith('(')) return functionName;
    return SOCKET_WRITES.has(functionName) ? 'socket writes (syscall)' : 'other native';
  }
  if (url.includes('/dist/')) return 'gatehouse';
  if (url.includes('/node_modules/undici/')) return 'undici';
  if (url.includes('/node_modules/')) return 'other packages';
  if (url.includes('/scripts/')) return 'bare proxy script';
  return 'node.js (JS)';
}

function load(dir) {
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  const profile = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8'));
  const requests = Number(readFileSync(`${dir}/requests`, 'utf8'));
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const groups = new Map();
  const functions = new Map();
  profile.samples.forEach((id, i) => {
    const frame = frames.get(id);
    const us = (profile.timeDeltas[i] ?? 0) / requests;
    const group = groupOf(frame);
    if (group === null) return;
    groups.set(group, (groups.get(group) ?? 0) + us);
    const key = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/.*\/node_modules\//, '').replace(/.*\/dist\//, 'dist/')}:${frame.lineNumber + 1}`;
    functions.set(key, (functions.get(key) ?? 0) + us);
  });
  return { name: basename(dir), groups, functions };
}

const entries = process.argv.slice(2).map(load);
const names = [...new Set(entries.flatMap((e) => [...e.groups.keys()]))].sort((a, b) => (entries[0].groups.get(b) ?? 0) - (entries[0].groups.get(a) ?? 0));
const column = (text) => String(text).padStart(12);
console.log(`${'µs/request (main thread, sampled)'.padEnd(36)}${entries.map((e) => column(e.name)).join('')}`);
for (const name of names) console.log(`${name.padEnd(36)}${entries.map((e) => column((e.groups.get(name) ?? 0).toFixed(2))).join('')}`);
const total = (e) => [...e.groups].filter(([name]) => !name.startsWith('module loading')).reduce((sum, [, us]) => sum + us, 0);
console.log(`${'total, start-up excluded'.padEnd(36)}${entries.map((e) => column(total(e).toFixed(2))).join('')}`);
for (const e of entries.slice(1)) {
  const base = entries[0];
  const keys = new Set([...base.functions.keys(), ...e.functions.keys()]);
  const rows = [...keys].map((k) => [k, (e.functions.get(k) ?? 0) - (base.functions.get(k) ?? 0)]).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
  console.log(`\n${e.name} − ${base.name}, largest differences (µs/request):`);
  for (const [k, d] of rows.slice(0, Number(process.env.TOP ?? 25))) console.log(`${(d >= 0 ? '+' : '') + d.toFixed(3)}  ${k}`);
}
