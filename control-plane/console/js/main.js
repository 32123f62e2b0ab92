// The console's shell: hash routes (#/apis, #/apis/new, #/apis/edit/<name>, …) to views, the login
// when there is no session, the top bar. The hash carries no secret; the token stays in sessionStorage.
import { onSessionExpired, session } from './api-client.js';
import { dataPlanesView } from './dataplanes-view.js';
import { definitionEditView, definitionListView } from './definition-views.js';
import { notice } from './element.js';
import { explainView } from './explain-view.js';
import { loginView } from './login-view.js';
import { definitionKinds } from './resource-kinds.js';

const view = document.getElementById('view');
const topbar = document.getElementById('topbar');

const routes = [
  ...definitionKinds.flatMap((kind) => [
    [new RegExp(`^#/${kind.route}$`), () => definitionListView(kind)],
    [new RegExp(`^#/${kind.route}/new$`), () => definitionEditView(kind)],
    [new RegExp(`^#/${kind.route}/edit/([^/]+)$`), (m) => definitionEditView(kind, decodeURIComponent(m[1]))],
  ]),
  [/^#\/dataplanes$/, (_m, ctx) => dataPlanesView(ctx)],
  [/^#\/explain$/, () => explainView()],
];
const DEFAULT_HASH = '#/apis';

let leaving = [];
let renderCount = 0;

function leave() {
  for (const fn of leaving) fn();
  leaving = [];
}

async function render(reason) {
  const current = ++renderCount;
  leave();
  if (!session.token()) {
    topbar.hidden = true;
    view.replaceChildren(loginView({ reason, onLoggedIn: () => render() }));
    view.querySelector('input[type="password"]')?.focus();
    return;
  }
  topbar.hidden = false;
  const hash = routes.some(([re]) => re.test(location.hash)) ? location.hash : DEFAULT_HASH;
  if (hash !== location.hash) {
    location.replace(hash); // hashchange renders
    return;
  }
  for (const link of topbar.querySelectorAll('nav a')) {
    if (hash.startsWith(link.getAttribute('href'))) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const [re, build] = routes.find(([pattern]) => pattern.test(hash));
  const ctx = { onLeave: (fn) => leaving.push(fn) };
  let content;
  try {
    content = await build(re.exec(hash), ctx);
  } catch (err) {
    if (!session.token()) return; // the session expired during the call: the login is already shown
    content = notice('error', err.message);
  }
  if (current !== renderCount) return; // a later navigation won
  view.replaceChildren(content);
  view.focus();
}

document.getElementById('logout').addEventListener('click', () => {
  session.end();
  render();
});
onSessionExpired(() => render('Your session has ended; please sign in again.'));
window.addEventListener('hashchange', () => render());
render();
