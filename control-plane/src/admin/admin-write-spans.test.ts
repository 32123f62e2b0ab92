import { writeTarget } from './admin-write-spans.js';

describe('writeTarget: what an admin request writes, for its span', () => {
  test.each([
    ["POST /apis names the body's name", 'POST', '/apis', { name: 'shop' }, { kind: 'api', route: '/apis', name: 'shop' }],
    ["PUT /apis/{name} names the path's", 'PUT', '/apis/shop', { name: 'other' }, { kind: 'api', route: '/apis/{name}', name: 'shop' }],
    ['PATCH decodes the name', 'PATCH', '/oauth/servers/a%20b', {}, { kind: 'oauth-server', route: '/oauth/servers/{name}', name: 'a b' }],
    ['DELETE keeps a malformed escape as is', 'DELETE', '/apis/%zz', undefined, { kind: 'api', route: '/apis/{name}', name: '%zz' }],
    [
      'POST a basic_auth user names its username',
      'POST',
      '/credentials/basic_auth',
      { username: 'ann' },
      { kind: 'basic-auth-credential', route: '/credentials/basic_auth', name: 'ann' },
    ],
    [
      'POST a key_auth credential names its username',
      'POST',
      '/credentials/key_auth',
      { username: 'bob' },
      { kind: 'key-auth-credential', route: '/credentials/key_auth', name: 'bob' },
    ],
    ['POST without a name', 'POST', '/apis', 'not an object', { kind: 'api', route: '/apis', name: undefined }],
    ['PUT /config', 'PUT', '/config', {}, { kind: 'config', route: '/config', name: undefined }],
  ])('%s', (_name, method, path, body, expected) => {
    expect(writeTarget(method, path, body)).toEqual(expected);
  });

  test.each([
    ['a read', 'GET', '/apis/shop'],
    ['POST /explain (reads)', 'POST', '/explain'],
    ['POST /login', 'POST', '/login'],
    ['a path that only starts like a collection', 'POST', '/apis-extra'],
  ])('no span for %s', (_name, method, path) => {
    expect(writeTarget(method, path, {})).toBeNull();
  });
});
