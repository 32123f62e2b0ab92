// List, create, edit and delete for one definition kind (APIs, OAuth servers). The JSON editor holds the
// whole definition; the friendly fields above it edit the same object. An edit is sent as a JSON merge
// patch of exactly what changed; a refused write shows the API's message at the field it names.
import { api, ApiError } from './api-client.js';
import { h, markInvalid, notice, table } from './element.js';
import { friendlyField } from './friendly-field.js';
import { fieldPathOf, locateInJson, mergePatch } from './json-path.js';

/** One message carried to the next list view (after a save or delete). */
let flash = null;

const pretty = (value) => JSON.stringify(value, null, 2);
const itemPath = (kind, name) => `${kind.path}/${encodeURIComponent(name)}`;
const editHash = (kind, name) => `#/${kind.route}/edit/${encodeURIComponent(name)}`;
const savedText = (verb, kind, name, version) => `${verb} ${kind.singular} ${name}${version ? ` (snapshot version ${version})` : ''}.`;

export async function definitionListView(kind) {
  const view = h('section', { 'aria-labelledby': 'title' });
  const status = h('div', { 'aria-live': 'polite' });
  if (flash) status.append(notice('ok', flash));
  flash = null;
  view.append(
    h('div', { class: 'actions' }, h('h1', { id: 'title' }, kind.title), h('a', { href: `#/${kind.route}/new`, class: 'button-link' }, `New ${kind.singular}`)),
    status,
  );
  const { data: items } = await api('GET', kind.path);

  const deleteButton = (item) => {
    let armed = false;
    const button = h('button', { type: 'button', class: 'secondary', 'aria-label': `Delete ${item.name}` }, 'Delete');
    button.addEventListener('click', async () => {
      if (!armed) {
        armed = true;
        button.textContent = 'Confirm delete';
        button.className = 'danger';
        return;
      }
      status.replaceChildren();
      try {
        const { snapshotVersion } = await api('DELETE', itemPath(kind, item.name));
        button.closest('tr')?.remove();
        status.append(notice('ok', savedText('Deleted', kind, item.name, snapshotVersion)));
      } catch (err) {
        status.append(notice('error', err.message));
      }
    });
    return button;
  };

  view.append(
    table(
      [['Name', (d) => h('a', { href: editHash(kind, d.name) }, d.name)], ...kind.columns, ['', (d) => deleteButton(d)]],
      items,
      `No ${kind.title} yet.`,
      (d) => ({ 'data-name': d.name }),
    ),
  );
  return view;
}

/** name undefined = create. */
export async function definitionEditView(kind, name) {
  const creating = name === undefined;
  const original = creating ? null : (await api('GET', itemPath(kind, name))).data;
  const formError = h('div', { 'aria-live': 'assertive' });
  const json = h('textarea', { id: 'definition-json', class: 'json', spellcheck: 'false', 'aria-describedby': 'definition-json-error' });
  const jsonError = h('p', { class: 'field-error', id: 'definition-json-error', hidden: true });
  json.value = pretty(original ?? kind.template());

  const parseJson = () => {
    try {
      const value = JSON.parse(json.value);
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('the definition must be a JSON object');
      return value;
    } catch (err) {
      setJsonError(`JSON: ${err.message}`);
      return null;
    }
  };

  const fields = kind.fields.map((field) =>
    friendlyField(field, {
      onInput() {
        const draft = parseJson();
        if (!draft) return;
        current(field.path).setError(null);
        current(field.path).writeInto(draft);
        json.value = pretty(draft);
      },
    }),
  );
  const current = (path) => fields.find((f) => f.field.path === path);
  const showFields = () => {
    const draft = parseJson();
    if (draft) for (const f of fields) f.show(draft);
  };
  json.addEventListener('change', () => {
    clearErrors();
    showFields();
  });
  if (!creating) current('name').input.readOnly = true;
  showFields();

  function setJsonError(message, path) {
    markInvalid(json, jsonError, message);
    const range = path ? locateInJson(json.value, path) : null;
    if (range) {
      json.focus();
      json.setSelectionRange(range[0], range[1]);
    }
  }

  function clearErrors() {
    for (const f of fields) f.setError(null);
    setJsonError(null);
    formError.replaceChildren();
  }

  /** The API's message at the friendly field it names, else at the JSON editor with the path selected, else above the form. */
  function showApiError(err, draft) {
    const path = kind.fieldOfMessage[err.message] ?? fieldPathOf(err.message);
    const field = path ? fields.find((f) => f.covers(path)) : undefined;
    if (field) {
      field.setError(err.message);
      field.input.focus();
    } else if (path && (/[.[]/.test(path) || path in draft)) {
      setJsonError(err.message, path);
    } else {
      formError.append(notice('error', err.message));
    }
  }

  const save = async (event) => {
    event.preventDefault();
    clearErrors();
    const draft = parseJson();
    if (!draft) return;
    try {
      const { data, snapshotVersion } = creating ? await api('POST', kind.path, draft) : await api('PUT', itemPath(kind, name), mergePatch(original, draft));
      flash = savedText(creating ? 'Created' : 'Saved', kind, data.name, snapshotVersion);
      location.hash = `#/${kind.route}`;
    } catch (err) {
      if (!(err instanceof ApiError)) formError.append(notice('error', `The control plane did not answer: ${err.message}`));
      else if (err.status !== 401) showApiError(err, draft); // 401: the session ended, the login is shown
    }
  };

  return h(
    'section',
    { 'aria-labelledby': 'title' },
    h('h1', { id: 'title' }, creating ? `New ${kind.singular}` : `${kind.singular} ${name}`),
    formError,
    h(
      'form',
      { class: 'stacked', novalidate: true, onsubmit: save },
      fields.map((f) => f.element),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'definition-json' }, 'Definition (JSON)'),
        json,
        h('span', { class: 'hint' }, 'The fields above edit this same definition. Saving an edit sends only what changed (JSON merge patch).'),
        jsonError,
      ),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, creating ? 'Create' : 'Save'), h('a', { href: `#/${kind.route}` }, 'Cancel')),
    ),
  );
}
