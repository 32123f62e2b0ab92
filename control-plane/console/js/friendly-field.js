// One friendly form field bound to a field path of a definition: builds its input, reads the value
// from a definition, writes it back, and shows an error message under itself.
import { h, markInvalid } from './element.js';
import { getPath, setPath } from './json-path.js';

const splitList = (text) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** How each field type shows a value and turns the input back into one. */
const types = {
  text: {
    input: (id) => h('input', { type: 'text', id, autocomplete: 'off', spellcheck: 'false' }),
    show: (input, value) => (input.value = typeof value === 'string' ? value : ''),
    read: (input) => (input.value === '' ? undefined : input.value),
  },
  list: {
    input: (id) => h('input', { type: 'text', id, autocomplete: 'off', spellcheck: 'false' }),
    show: (input, value) => (input.value = Array.isArray(value) ? value.join(', ') : ''),
    read: (input) => {
      const items = splitList(input.value);
      return items.length > 0 ? items : undefined;
    },
  },
  targets: {
    input: (id) => h('textarea', { id, class: 'lines', spellcheck: 'false' }),
    show: (input, value) => (input.value = Array.isArray(value) ? value.map((t) => t?.target ?? '').join('\n') : ''),
    // Keeps what else a target carries (weight) when its URL is unchanged.
    read: (input, previous) =>
      input.value
        .split('\n')
        .map((s) => s.trim())
        .filter(Boolean)
        .map((url) => (Array.isArray(previous) ? previous.find((t) => t?.target === url) : undefined) ?? { target: url }),
  },
  // `Name: value, value` per line ⇄ proxy.match_headers' {name: [values]}. A line without a colon is
  // kept as a name with no values, so the API's message about it lands here rather than vanishing.
  headers: {
    input: (id) => h('textarea', { id, class: 'lines', spellcheck: 'false' }),
    show: (input, value) =>
      (input.value =
        value && typeof value === 'object' && !Array.isArray(value)
          ? Object.entries(value)
              .map(([name, values]) => `${name}: ${Array.isArray(values) ? values.join(', ') : ''}`)
              .join('\n')
          : ''),
    read: (input) => {
      const entries = input.value
        .split('\n')
        .map((line) => line.trim())
        .filter(Boolean)
        .map((line) => {
          const colon = line.indexOf(':');
          return colon < 0 ? [line, []] : [line.slice(0, colon).trim(), splitList(line.slice(colon + 1))];
        });
      return entries.length > 0 ? Object.fromEntries(entries) : undefined;
    },
  },
  checkbox: {
    input: (id) => h('input', { type: 'checkbox', id }),
    show: (input, value, field) => (input.checked = typeof value === 'boolean' ? value : Boolean(field.default)),
    read: (input) => input.checked,
  },
  select: {
    input: (id, field) =>
      h(
        'select',
        { id },
        h('option', { value: '' }, '—'),
        field.options.map((o) => h('option', { value: o }, o)),
      ),
    show: (input, value) => (input.value = typeof value === 'string' ? value : ''),
    read: (input) => (input.value === '' ? undefined : input.value),
  },
};

let nextId = 0;

/** { field, element, input, show(definition), writeInto(definition), setError(message|null), covers(path) } */
export function friendlyField(field, { onInput }) {
  const type = types[field.type];
  const id = `f${++nextId}`;
  const input = type.input(id, field);
  input.dataset.path = field.path;
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  input.setAttribute('aria-describedby', `${id}-error`);
  input.addEventListener(field.type === 'checkbox' || field.type === 'select' ? 'change' : 'input', onInput);
  const label = h('label', { for: id }, field.label);
  const element =
    field.type === 'checkbox'
      ? h('div', { class: 'field inline' }, input, label, error)
      : h('div', { class: 'field' }, label, input, field.hint ? h('span', { class: 'hint' }, field.hint) : null, error);
  return {
    field,
    element,
    input,
    show: (definition) => type.show(input, getPath(definition, field.path), field),
    writeInto: (definition) => setPath(definition, field.path, type.read(input, getPath(definition, field.path))),
    setError: (message) => markInvalid(input, error, message),
    /** Whether an error about `path` belongs here (the path itself or something inside it). */
    covers: (path) => path === field.path || path.startsWith(`${field.path}.`) || path.startsWith(`${field.path}[`),
  };
}
