/** One series' value on a data plane's status listener: `series` is the name and labels as exposed, 0 when absent. */
import { httpRequest } from './http-request.js';

export async function metricValue(statusUrl: string, series: string): Promise<number> {
  const text = (await httpRequest(`${statusUrl}/metrics`)).body.toString();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}
