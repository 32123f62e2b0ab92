// Instructions per request by function, from the callgrind dumps of scripts/count-instructions.sh run with
// FUNCTIONS=1 (docs/benchmarks.md, "By function"): callgrind names node's own C++ and V8's
// builtins, but JIT-compiled JavaScript is only an address to it; node's --perf-basic-prof writes the address range of
// each compiled function to /tmp/perf-<pid>.map, which names it here. Functions are keyed by name alone (an undici
// function is the same row in the bare proxy, which loads node_modules, and in the DP's bundle), tier markers (`*`
// optimized, `^` baseline, `~` interpreted) dropped, so a function's tiers add up. Self instructions: what a
// function ran itself, not its callees (a V8 builtin it calls is its own row).
//
//   node scripts/callgrind-functions.mjs <label>:<dump>:<perf map>:<requests> [...]   (needs callgrind_annotate)
//
// One entry: its top functions. Several: each function's count per entry and its difference from the first entry,
// largest differences first. ROWS (default 40) sets the number of rows.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The perf map's [start, end, name] ranges, sorted by start. */
function readPerfMap(path) {
  const ranges = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (m) ranges.push([parseInt(m[1], 16), parseInt(m[1], 16) + parseInt(m[2], 16), m[3]]);
  }
  return ranges.sort((a, b) => a[0] - b[0]);
}

/** The name of the code at `address`: the last range starting at or before it that holds it (code is made anew at an address freed earlier). */
function nameAt(ranges, address) {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[mid][0] <= address) lo = mid + 1;
    else hi = mid - 1;
  }
  for (let i = hi; i >= 0 && i > hi - 64; i--) if (ranges[i][0] <= address && address < ranges[i][1]) return ranges[i][2];
  return null;
}

/** `JS:*resumeH1 file:///…/main.js:42:20757` → `resumeH1`; a builtin, a regular expression or C++ as named. */
function key(name) {
  const js = /^(?:JS|LazyCompile|Function):[*~^+]?(\S*)(?: (.*))?$/.exec(name);
  if (!js) return name.replace(/^Builtin:/, 'Builtins_'); // callgrind's name for a builtin, which the map names `Builtin:`
  if (js[1]) return js[1];
  return `(anonymous) ${(js[2] ?? '').replace(/^.*\//, '')}`;
}

/** Self instructions per request by function key. */
function functionsOf(dump, perfMap, requests) {
  const ranges = readPerfMap(perfMap);
  const text = execFileSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', dump], { encoding: 'utf8', maxBuffer: 256 << 20 });
  const byKey = new Map();
  let all = Infinity;
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \([\s\d.]+%\)\s+(\S.*?)(?: \[([^\]]*)\])?$/.exec(line);
    if (!m) continue;
    const instructions = Number(m[1].replaceAll(',', ''));
    if (m[2] === 'PROGRAM TOTALS') {
      all = instructions;
      byKey.set('(all)', instructions / requests);
      continue;
    }
    // The frames every instruction runs under (main, the event loop, libc's start) show the whole program: nobody's own work.
    if (instructions >= all) continue;
    // callgrind_annotate's `file:function`, the file `???` when unknown; JIT code's object is `???` too.
    let name = m[2].replace(/^(\?\?\?|[^\s:]*\.(?:c|cc|cpp|h|S|s)):(?!:)/, '');
    const address = /^0x([0-9a-f]+)$/.exec(name);
    if (address && m[3] === '???') name = nameAt(ranges, parseInt(address[1], 16)) ?? '(code without a name: wasm, stubs)';
    // callgrind marks a recursive call's frame `name'2`: the same function.
    const k = key(name.replace(/'\d+$/, ''));
    byKey.set(k, (byKey.get(k) ?? 0) + instructions / requests);
  }
  return byKey;
}

const entries = process.argv.slice(2).map((arg) => {
  const [label, dump, perfMap, requests] = arg.split(':');
  return { label, functions: functionsOf(dump, perfMap, Number(requests)) };
});
if (entries.length === 0) {
  console.error('usage: node scripts/callgrind-functions.mjs <label>:<dump>:<perf map>:<requests> [...]');
  process.exit(2);
}
const rows = Number(process.env.ROWS ?? 40);
const names = new Set(entries.flatMap((e) => [...e.functions.keys()]));
names.delete('(all)');
const count = (e, name) => e.functions.get(name) ?? 0;
const [first] = entries;
/** How far `name`'s count in any entry is from the first entry's (its own count when there is one entry). */
const spread = (name) => (entries.length === 1 ? count(first, name) : Math.max(...entries.map((e) => Math.abs(count(e, name) - count(first, name)))));
const order = [...names]
  .map((name) => [spread(name), name])
  .sort((a, b) => b[0] - a[0])
  .map(([, name]) => name);
const width = 11;
const cells = (values) => values.map((v) => String(Math.round(v)).padStart(width)).join('');
const labels =
  entries.map((e) => e.label.padStart(width)).join('') +
  (entries.length > 1
    ? entries
        .slice(1)
        .map((e) => `${e.label}−${first.label}`.padStart(width))
        .join('')
    : '');
console.log(`instructions per request, self, by function (${entries.length > 1 ? `largest differences from ${first.label} first` : 'largest first'})`);
console.log(`${labels}  function`);
const line = (values) => cells(values) + (entries.length > 1 ? cells(values.slice(1).map((v) => v - values[0])) : '');
console.log(`${line(entries.map((e) => count(e, '(all)')))}  (all)`);
for (const name of order.slice(0, rows)) console.log(`${line(entries.map((e) => count(e, name)))}  ${name}`);
