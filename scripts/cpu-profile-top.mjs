// Self time by function and by library in a node --cpu-prof profile, optionally within a window of
// CLOCK_MONOTONIC µs (the clock of the profile's timestamps, which bench:kubernetes prints):
//   node scripts/cpu-profile-top.mjs <file.cpuprofile> [fromUs toUs] [TOP]
import { readFileSync } from 'node:fs';

const [file, a, b, c] = process.argv.slice(2);
const windowed = b !== undefined;
const from = windowed ? Number(a) : -Infinity;
const to = windowed ? Number(b) : Infinity;
const top = Number((windowed ? c : a) ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));

/** The package a script belongs to: node_modules' package, node's own modules, or the project's folder. */
function library({ url, functionName }) {
  if (!url) return functionName.startsWith('(') ? functionName : 'native';
  if (url.startsWith('node:')) return 'node';
  const pkg = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1];
  const own = url.match(/\/(control-plane|data-plane|proto)\//);
  return own ? `gatehouse ${own[1]}` : url;
}

const byFunction = new Map();
const byLibrary = new Map();
let total = 0;
let t = profile.startTime;
profile.samples.forEach((id, i) => {
  t += profile.timeDeltas[i];
  if (t < from || t > to) return;
  // Each sample stands for the time until the next one.
  const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  const { callFrame } = nodes.get(id);
  if (callFrame.functionName === '(idle)') return;
  total += dt;
  const lib = library(callFrame);
  const key = `${callFrame.functionName || '(anonymous)'} ${callFrame.url.split('/').slice(-2).join('/')}:${callFrame.lineNumber + 1} [${lib}]`;
  byFunction.set(key, (byFunction.get(key) ?? 0) + dt);
  byLibrary.set(lib, (byLibrary.get(lib) ?? 0) + dt);
});
const print = (title, map) => {
  console.log(title);
  for (const [key, ms] of [...map].sort((x, y) => y[1] - x[1]).slice(0, top))
    console.log(`${ms.toFixed(0).padStart(7)} ms ${((100 * ms) / total).toFixed(1).padStart(5)} %  ${key}`);
};
console.log(`busy (not idle) ${total.toFixed(0)} ms`);
print('self time by library', byLibrary);
print('self time by function', byFunction);
