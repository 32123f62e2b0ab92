/**
 * What the CLI prints: aligned tables for people (the default), `--output json` for scripts (one
 * JSON document on stdout), `--output yaml` for files to edit and apply.
 */
import yaml from 'js-yaml';
import { CliError } from './admin-http.js';

export type OutputFormat = 'table' | 'json' | 'yaml';

export const OUTPUT_FORMATS: OutputFormat[] = ['table', 'json', 'yaml'];

export function parseOutputFormat(value: string): OutputFormat {
  if (!(OUTPUT_FORMATS as string[]).includes(value)) throw new CliError(`--output must be one of ${OUTPUT_FORMATS.join(', ')}`, 2);
  return value as OutputFormat;
}

/** A column: its heading and how to read it from a row. */
export type Column<T> = [heading: string, cell: (row: T) => unknown];

function cellText(value: unknown): string {
  if (value === undefined || value === null || value === '') return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map(cellText).join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export function formatTable<T>(rows: T[], columns: Column<T>[]): string {
  const cells = [columns.map(([heading]) => heading), ...rows.map((row) => columns.map(([, cell]) => cellText(cell(row))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n');
}

export function formatData(data: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? JSON.stringify(data, null, 2) : yaml.dump(data, { noRefs: true, lineWidth: -1 }).trimEnd();
}

/** Prints `data` as `format`; for `table`, the columns (or, when there are none, YAML). */
export function print<T>(format: OutputFormat, data: T[] | T, columns?: Column<T>[]): void {
  if (format === 'table' && columns) {
    const rows = Array.isArray(data) ? data : [data];
    console.log(rows.length === 0 ? 'No resources found.' : formatTable(rows, columns));
    return;
  }
  console.log(formatData(data, format === 'table' ? 'yaml' : format));
}
