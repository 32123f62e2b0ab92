// The sign-in form: POST /login, the token goes to sessionStorage (api-client.js), never into a URL.
import { login } from './api-client.js';
import { h, notice } from './element.js';

export function loginView({ reason, onLoggedIn }) {
  const username = h('input', { type: 'text', id: 'login-username', autocomplete: 'username', value: 'admin', required: true });
  const password = h('input', { type: 'password', id: 'login-password', autocomplete: 'current-password', required: true });
  const status = h('div', { 'aria-live': 'assertive' }, reason ? notice('error', reason) : null);
  const submit = async (event) => {
    event.preventDefault();
    status.replaceChildren();
    try {
      await login(username.value, password.value);
      onLoggedIn();
    } catch (err) {
      status.append(notice('error', `Sign-in failed: ${err.message}`));
      password.select();
    }
  };
  return h(
    'section',
    { class: 'login', 'aria-labelledby': 'title' },
    h('h1', { id: 'title' }, 'Sign in to Gatehouse'),
    status,
    h(
      'form',
      { class: 'stacked', onsubmit: submit },
      h('div', { class: 'field' }, h('label', { for: 'login-username' }, 'User name'), username),
      h('div', { class: 'field' }, h('label', { for: 'login-password' }, 'Password'), password),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Sign in')),
    ),
  );
}
