// Reads the heap profiles scripts/alloc-per-request.sh wrote and prints, per entry, the bytes allocated
// per request, the functions that allocated most, then the functions whose bytes per request differ most
// from the first entry's, each with its two nearest callers. Not part of the product.
//   node scripts/allocation-per-request.mjs <dir> [<dir> ...]   (each dir: profile.json and a `requests` file)
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const TOP = Number(process.env.TOP ?? 20);
const frame = ({ functionName, url, lineNumber }) =>
  `${functionName || '(anonymous)'} ${url
    .replace(/.*\/node_modules\//, '')
    .replace(/.*\/(dist|bundle)\//, '$1/')
    .replace(/.*\/scripts\//, 'scripts/')}:${lineNumber + 1}`;

function load(dir) {
  const profile = JSON.parse(readFileSync(`${dir}/profile.json`, 'utf8'));
  const requests = Number(readFileSync(`${dir}/requests`, 'utf8'));
  const functions = new Map();
  const callers = new Map();
  let total = 0;
  (function walk(node, chain) {
    const path = [...chain, frame(node.callFrame)];
    if (node.selfSize > 0) {
      const perRequest = node.selfSize / requests;
      const fn = path.at(-1);
      total += perRequest;
      functions.set(fn, (functions.get(fn) ?? 0) + perRequest);
      const byCaller = callers.get(fn) ?? new Map();
      const from = path.slice(-3, -1).reverse().join(' < ');
      byCaller.set(from, (byCaller.get(from) ?? 0) + perRequest);
      callers.set(fn, byCaller);
    }
    for (const child of node.children) walk(child, path);
  })(profile.head, []);
  return { name: basename(dir), requests, total, functions, callers };
}

const bytes = (n) => `${n >= 0 ? '' : '-'}${Math.abs(n).toFixed(0)}`.padStart(7);
const entries = process.argv.slice(2).map(load);
for (const e of entries) {
  console.log(`${e.name}: ${e.total.toFixed(0)} bytes allocated per request (${e.requests} requests sampled)`);
  for (const [fn, b] of [...e.functions].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${bytes(b)}  ${fn}`);
  console.log('');
}
const base = entries[0];
for (const e of entries.slice(1)) {
  const keys = new Set([...base.functions.keys(), ...e.functions.keys()]);
  const rows = [...keys].map((k) => [k, (e.functions.get(k) ?? 0) - (base.functions.get(k) ?? 0)]).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
  console.log(`${e.name} − ${base.name}: ${bytes(e.total - base.total).trim()} bytes per request; largest differences, with ${e.name}'s callers:`);
  for (const [fn, d] of rows.slice(0, TOP)) {
    const from = [...(e.callers.get(fn) ?? base.callers.get(fn) ?? [])].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '';
    const delta = `${d >= 0 ? '+' : ''}${bytes(d).trim()}`;
    console.log(`${delta.padStart(7)}  ${fn}${from ? `  ← ${from}` : ''}`);
  }
}
