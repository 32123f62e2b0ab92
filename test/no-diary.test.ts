/**
 * The repository speaks of the product only: no tracked file cites an issue number or tells the history of the
 * work (which run or session did what, what held until a date, what a change replaced). A comment gives the reason or the
 * invariant; measured figures live in docs/benchmarks.md, with their date; the history is in the commit messages.
 * The phrases are few and precise, so that the product's own words (an OpenID Connect session, a CP's previous
 * run after a restart, JSON Schema's draft 2020-12) pass.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const THIS_FILE = 'test/no-diary.test.ts';

const ORDINALS =
  'first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|' +
  'sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\\d+(?:st|nd|rd|th)';

/** What tells the history of the work rather than the product, with why each is there. */
const DIARY: ReadonlyArray<[name: string, pattern: RegExp]> = [
  ['an issue number', /\bissues?\s*#?\d+/i],
  ['a numbered session', new RegExp(`\\b(?:${ORDINALS})\\s+session\\b`, 'i')],
  ['a session of the work', /\b(?:this|the previous|the last|the next|a later|an earlier)\s+session\b/i],
  ['a change told against the code before it', /\b(?:before|after|since|until)\s+this\s+change\b/i],
  ['a dated history', /\b(?:until|since|as of|before)\s+20\d\d-\d\d\b/i],
  ['a review or its findings', /\bthe review (?:found|said|asked)\b|\bfinding\s+#?\d+\b/i],
];

/** Files no one writes by hand (generated from a source that is scanned) and the lock file. */
const GENERATED = [/^package-lock\.json$/, /^proto\/src\/wire\.ts$/, /^deploy\/crds\//, /^helm\/gatehouse\/crds\//, /^deploy\/manifests\/gatehouse\.yaml$/];

/** `path:line: text` for every line of `text` that reads as work history. */
function diaryLines(path: string, text: string): string[] {
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    const hit = DIARY.find(([, pattern]) => pattern.test(line));
    if (hit) found.push(`${path}:${i + 1}: ${hit[0]}: ${line.trim().slice(0, 160)}`);
  });
  return found;
}

function trackedFiles(): string[] {
  return execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((path) => path !== '' && path !== THIS_FILE && !GENERATED.some((g) => g.test(path)));
}

describe('the phrases', () => {
  // Assembled from placeholders (%I, %S), so that this file's own text holds no line a diary scanner would refuse.
  const word: Record<string, string> = { '%I': ['iss', 'ue'].join(''), '%S': ['sess', 'ion'].join('') };
  test.each(
    [
      'see %I 12',
      'fixed in %I #12',
      '%Is 9 and 11 asked for it',
      '(%I 11, part 2)',
      '%I#7',
      'the ninth %S measured it',
      "the 15th %S's run",
      'measured in the previous %S',
      'changed this %S? no: in this %S',
      'before this change the cache was global',
      'until 2026-11 each status carried counts',
      'the review found a race',
      'finding 3: tokens leak',
    ].map((line) => line.replace(/%[IS]/g, (p) => word[p]!).replace('(issue', '(Issue')),
  )('flag %j', (line) => {
    expect(diaryLines('x', line)).toHaveLength(1);
  });

  test.each([
    'a session cookie sealed with AES-256-GCM',
    'without a session, requests get 401',
    'One session: the server it was made for',
    "Its CP's previous run numbered the same content 41.",
    'JSON Schema draft 2020-12',
    "at: '2026-11-26T10:00:00Z'",
    'Measured on 2026-11-27 (docs/benchmarks.md)',
    'the first zod issue becomes the error',
    'tokens issued before it still verify',
    'the session ends at session_ttl',
  ])('pass %j', (line) => {
    expect(diaryLines('x', line)).toEqual([]);
  });
});

test('no tracked file tells the history of the work', () => {
  const files = trackedFiles();
  expect(files.length).toBeGreaterThan(100);
  const found: string[] = [];
  for (const path of files) {
    let text: string;
    try {
      text = readFileSync(join(root, path), 'utf8');
    } catch {
      continue; // deleted in the work tree, not yet in the index
    }
    if (text.includes('\0')) continue; // binary
    found.push(...diaryLines(path, text));
  }
  expect(found).toEqual([]);
});
