/**
 * Files the CLI reads (`apply -f`, `import -f`): YAML or JSON (JSON is YAML), `-` = stdin. A file
 * may hold one definition, a list of them, or several YAML documents separated by `---`.
 */
import { readFile } from 'node:fs/promises';
import yaml from 'js-yaml';
import { CliError } from './admin-http.js';

async function readText(file: string): Promise<string> {
  try {
    if (file !== '-') return await readFile(file, 'utf8');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Every YAML document of the file; arrays are flattened, empty documents skipped. */
export async function readDocuments(file: string): Promise<unknown[]> {
  const text = await readText(file);
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text);
  } catch (err) {
    throw new CliError(`${file} is neither YAML nor JSON: ${(err as Error).message}`);
  }
  return docs.flatMap((d) => (Array.isArray(d) ? d : [d])).filter((d) => d !== null && d !== undefined);
}

/** The one document of a file (a whole configuration). */
export async function readDocument(file: string): Promise<unknown> {
  const docs = await readDocuments(file);
  if (docs.length !== 1) throw new CliError(`${file} must hold exactly one document, found ${docs.length}`);
  return docs[0];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The RFC 7396 merge patch that turns `current` into `desired`: members absent from `desired` are
 * set to null (removed: the server fills its default), nested objects are patched member by member,
 * anything else is replaced.
 */
export function mergePatchBetween(current: unknown, desired: unknown): unknown {
  if (!isObject(current) || !isObject(desired)) return desired;
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(current)) if (!(key in desired)) patch[key] = null;
  for (const [key, value] of Object.entries(desired)) {
    if (JSON.stringify(current[key]) === JSON.stringify(value)) continue;
    patch[key] = mergePatchBetween(current[key], value);
  }
  return patch;
}
