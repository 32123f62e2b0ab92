/**
 * The documentation's own links hold: every relative link in README.md and docs/*.md names a file of the
 * repository, and every `#anchor` a heading of the file it points at (GitHub's anchors: lower case, punctuation
 * dropped, spaces as hyphens, a repeated heading numbered). Links to other sites are not followed.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, text] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

test.each(pages)('the links of %s resolve', (page) => {
  const text = readFileSync(join(root, page), 'utf8');
  const broken: string[] = [];
  for (const [, link] of prose(text)
    .replace(/`[^`\n]*`/g, '')
    .matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue;
    const [path, anchor] = link.split('#', 2);
    const target = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
    if (!existsSync(target)) {
      broken.push(`${link}: no file ${relative(root, target)}`);
      continue;
    }
    if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor)) {
      broken.push(`${link}: no heading #${anchor} in ${relative(root, target)}`);
    }
  }
  expect(broken).toEqual([]);
});

test('every page of docs/ is in the README map', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  expect(pages.filter((p) => p !== 'README.md' && !readme.includes(`](${p})`))).toEqual([]);
});
