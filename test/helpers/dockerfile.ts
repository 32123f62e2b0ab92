/**
 * Reads deploy/Dockerfile and .dockerignore the way the build would, for a test that cannot run a
 * container engine: stages with their instructions (ARG defaults substituted in FROM, line
 * continuations joined, exec-form JSON parsed), and .dockerignore matching (Docker's rules for
 * the patterns a repository like this uses: `*`, `**`, `?`, `!` exceptions, last match wins, a
 * pattern that matches a directory excludes what is under it).
 */
import { readFile } from 'node:fs/promises';

export interface Instruction {
  keyword: string;
  /** The text after the keyword, continuations joined. */
  text: string;
  /** `--name=value` flags (COPY --from, --chown). */
  flags: Record<string, string>;
  /** Words after the flags (shell form), or the JSON array (exec form). */
  args: string[];
  json: boolean;
}

export interface Stage {
  /** `AS name`, or the index as a string for an unnamed stage. */
  name: string;
  from: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  stages: Stage[];
  final: Stage;
  stage(name: string): Stage;
}

function parseInstruction(line: string): Instruction {
  const m = /^(\w+)\s+([\s\S]*)$/.exec(line);
  if (!m) throw new Error(`cannot parse Dockerfile line: ${line}`);
  const keyword = m[1].toUpperCase();
  const text = m[2].trim();
  const flags: Record<string, string> = {};
  let rest = text;
  for (;;) {
    const flag = /^--([\w-]+)=(\S+)\s+/.exec(rest);
    if (!flag) break;
    flags[flag[1]] = flag[2];
    rest = rest.slice(flag[0].length);
  }
  if (rest.startsWith('[')) {
    const parsed: unknown = JSON.parse(rest);
    if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === 'string')) throw new Error(`exec form is not a string array: ${line}`);
    return { keyword, text, flags, args: parsed, json: true };
  }
  return { keyword, text, flags, args: rest.split(/\s+/).filter(Boolean), json: false };
}

export async function readDockerfile(path: string): Promise<Dockerfile> {
  const raw = await readFile(path, 'utf8');
  const lines: string[] = [];
  let pending = '';
  for (const line of raw.split('\n')) {
    if (/^\s*#/.test(line) && pending === '') continue;
    if (/^\s*#/.test(line)) continue; // comment inside a continuation
    if (line.trimEnd().endsWith('\\')) {
      pending += `${line.trimEnd().slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    if (full) lines.push(full);
  }
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const instruction = parseInstruction(line);
    if (instruction.keyword === 'ARG' && stages.length === 0) {
      const [name, value = ''] = instruction.args[0].split('=');
      args[name] = value;
      continue;
    }
    if (instruction.keyword === 'FROM') {
      const image = instruction.args[0].replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a?: string, b?: string) => args[(a ?? b)!] ?? '');
      const as = instruction.args.findIndex((w) => w.toUpperCase() === 'AS');
      stages.push({ name: as >= 0 ? instruction.args[as + 1] : String(stages.length), from: image, instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`instruction before FROM: ${line}`);
    stages[stages.length - 1].instructions.push(instruction);
  }
  if (stages.length === 0) throw new Error(`${path} has no FROM`);
  return {
    stages,
    final: stages[stages.length - 1],
    stage(name) {
      const found = stages.find((s) => s.name === name);
      if (!found) throw new Error(`${path} has no stage ${name}`);
      return found;
    },
  };
}

/** The last instruction of `keyword` in a stage (CMD, ENTRYPOINT, USER, WORKDIR: the last one wins). */
export function last(stage: Stage, keyword: string): Instruction | undefined {
  return [...stage.instructions].reverse().find((i) => i.keyword === keyword);
}

function patternRegex(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      // `**/` matches any number of directories, including none.
      if (pattern[i + 2] === '/') {
        re += '(?:.*/)?';
        i += 2;
      } else {
        re += '.*';
        i += 1;
      }
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** A predicate telling whether a context-relative path is excluded by the .dockerignore text. */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).replace(/^\/+/, '').replace(/\/+$/, '');
      return { negate, re: patternRegex(pattern) };
    });
  return (path) => {
    const parts = path.split('/');
    // The path itself or any directory above it.
    const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const rule of rules) {
      if (candidates.some((c) => rule.re.test(c))) excluded = !rule.negate;
    }
    return excluded;
  };
}
