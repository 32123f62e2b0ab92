// Dotted paths into definitions ("proxy.listen_path") as the admin API names fields in its errors,
// and RFC 7396 merge patches, so an edit sends exactly what changed (removed members as null).

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

export function getPath(obj, path) {
  return path.split('.').reduce((node, key) => (isObject(node) ? node[key] : undefined), obj);
}

/** Sets a value (undefined removes it), creating the objects on the way. */
export function setPath(obj, path, value) {
  const keys = path.split('.');
  let node = obj;
  for (const key of keys.slice(0, -1)) {
    if (!isObject(node[key])) node[key] = {};
    node = node[key];
  }
  const last = keys[keys.length - 1];
  if (value === undefined) delete node[last];
  else node[last] = value;
}

/** The merge patch that turns `from` into `to`. */
export function mergePatch(from, to) {
  if (!isObject(from) || !isObject(to)) return to;
  const patch = {};
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    if (isObject(value) && isObject(from[key])) {
      const nested = mergePatch(from[key], value);
      if (Object.keys(nested).length > 0) patch[key] = nested;
    } else if (JSON.stringify(value) !== JSON.stringify(from[key])) {
      patch[key] = value;
    }
  }
  return patch;
}

/** The leading field path of an admin error ("proxy.upstreams.targets[0].target is not a valid URL"). */
// Members below the top level may be header names (`proxy.match_headers.x-canary`), so they take `-`.
const LEADING_PATH = /^([A-Za-z_]\w*(?:\.\w[\w-]*|\[\d+\])*)\s/;
export function fieldPathOf(message) {
  return LEADING_PATH.exec(message)?.[1] ?? null;
}

/** Where `path` is spelled in pretty-printed JSON text: the range of its last member name, or null. */
export function locateInJson(text, path) {
  let from = 0;
  let range = null;
  for (const part of path.split(/\.|(?=\[)/)) {
    const index = /^\[(\d+)\]$/.exec(part);
    if (index) continue; // array positions are not spelled in the text; the next member name narrows it down
    const needle = `"${part}"`;
    const at = text.indexOf(needle, from);
    if (at < 0) return range;
    range = [at, at + needle.length];
    from = range[1];
  }
  return range;
}
