import { generateKeyPairSync } from 'node:crypto';
import { compileJwtKeys } from './jwt-keys.js';
import { GatehouseError } from '../errors.js';
import type { JwtAlg, JwtKeySetting } from '../definition/types.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsaSmall = generateKeyPairSync('rsa', { modulusLength: 1024 });
const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
const ed = generateKeyPairSync('ed25519');

const spki = (k: { publicKey: import('node:crypto').KeyObject }) => k.publicKey.export({ type: 'spki', format: 'pem' }) as string;
const rsaSpki = spki(rsa);
const rsaPkcs1 = rsa.publicKey.export({ type: 'pkcs1', format: 'pem' }) as string;
const rsaPrivate = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const rsaPrivatePkcs1 = rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
const ecPrivate = p256.privateKey.export({ type: 'sec1', format: 'pem' }) as string;

// Self-signed RSA-2048 certificate (public material only), to check that X.509 input is accepted.
const RSA_CERT = `-----BEGIN CERTIFICATE-----
MIIDFTCCAf2gAwIBAgIUVR1TsCXKVGDwcn5rOVjRyNomGZUwDQYJKoZIhvcNAQEL
BQAwGTEXMBUGA1UEAwwOZ2F0ZWhvdXNlLXRlc3QwIBcNMjYxMTIyMTAwNjM1WhgP
MjEyNjEwMjkxMDA2MzVaMBkxFzAVBgNVBAMMDmdhdGVob3VzZS10ZXN0MIIBIjAN
BgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA7sxMyJeeCtorKJyRmaMOGNzQy5mZ
DwmT83WS6aoynZ4RdZwHHUrXr2YMwSttP8a0hHFoRAo2Lb/m+o/kUij8q0zxecEx
XI7K/LeZaK8qVqOvXHTDneKxjIEXENCEKNIl7dx+W3ESNAlL+h0qTwAlTxo/PpTh
rYTQnWztUmkV91dONLmt+isVRC++g/4ZQqekw23wzQlkG1/05tewNCXpIauZpHuM
CFEeiNB+7Do2ExtAIShAiYhpSOvI2lj5WlW6jZIa2+XXX2sTt968HaVdic2bLbC5
Hk+MdPk16BHVvMG4M2MOXbVvgF0H+7Y5TxNYbZy+0h0o0NIxtfL8paf+8QIDAQAB
o1MwUTAdBgNVHQ4EFgQU0lXkz4/tj3CLEnsAfOKGl0C28rowHwYDVR0jBBgwFoAU
0lXkz4/tj3CLEnsAfOKGl0C28rowDwYDVR0TAQH/BAUwAwEB/zANBgkqhkiG9w0B
AQsFAAOCAQEAvC1oV25JXu5yOgCReRXYeFtCK3Ojm6j0Yl0zkCpccVvtG9IZrGdp
3q492HHxArZACAxkUCvzFyzXocjCAXrK9T1SkQrhAL8y4Ww9c/DbPU02XL1k/kju
YxdPFGgXOFPoeOy+SEjaIoRgLqSPxAu3WCTRYpTLkA4nGM50b+bSUbKeeIjE8uTR
uW/CpmT+M2q3OeaMO3oJVEvRvn9HsGjLeH1aDBI0ysyybYxH03IQfroJEtcV6Tuj
XfJvEPVjpjZ/Hy1/61mvzqFm/6fuGaM1cyh/GC8BjZ7egYy7UZPOPkYif/vzU8n4
PEKbbQwxjsPO5Z5n8hD2HCXAO9RXFg9QYw==
-----END CERTIFICATE-----
`;

const FIELD = 'token_strategy.settings';

describe('compileJwtKeys accepts keys that fit their alg', () => {
  test.each<[string, JwtAlg, string, string]>([
    ['HS256 secret', 'HS256', 'secret', 'secret'],
    ['HS384 secret', 'HS384', 'another-secret', 'secret'],
    ['HS512 short secret (seed uses short ones)', 'HS512', 'x', 'secret'],
    ['RS256 SPKI PEM', 'RS256', rsaSpki, 'public'],
    ['RS384 PKCS#1 PEM', 'RS384', rsaPkcs1, 'public'],
    ['RS512 X.509 certificate', 'RS512', RSA_CERT, 'public'],
    ['ES256 P-256 SPKI', 'ES256', spki(p256), 'public'],
    ['ES384 P-384 SPKI', 'ES384', spki(p384), 'public'],
  ])('%s', (_name, alg, key, type) => {
    const [compiled] = compileJwtKeys([{ alg, key }], FIELD);
    expect(compiled.alg).toBe(alg);
    expect(compiled.key.type).toBe(type);
  });

  test('several settings keep their order (rotation)', () => {
    const keys = compileJwtKeys(
      [
        { alg: 'HS256', key: 'old' },
        { alg: 'RS256', key: rsaSpki },
      ],
      FIELD,
    );
    expect(keys.map((k) => k.alg)).toEqual(['HS256', 'RS256']);
  });

  test('HS secret bytes are the UTF-8 of the setting', () => {
    const [k] = compileJwtKeys([{ alg: 'HS256', key: 'sécret' }], FIELD);
    expect(k.key.export().equals(Buffer.from('sécret', 'utf8'))).toBe(true);
  });
});

describe('compileJwtKeys refuses keys that do not fit', () => {
  test.each<[string, JwtKeySetting[], string, string]>([
    ['empty HS secret', [{ alg: 'HS256', key: '' }], 'token_strategy.settings[0].key', 'token_strategy.settings[0].key is required'],
    [
      'PEM as HMAC secret (alg confusion set-up)',
      [{ alg: 'HS256', key: rsaSpki }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is a PEM key, not a shared secret for HS256',
    ],
    [
      'garbage for RS256',
      [{ alg: 'RS256', key: 'not a pem' }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid RSA public key for RS256',
    ],
    [
      'PKCS#8 private key for RS256',
      [{ alg: 'RS256', key: rsaPrivate }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is a private key; RS256 needs a public key',
    ],
    [
      'PKCS#1 private key for RS384',
      [{ alg: 'RS384', key: rsaPrivatePkcs1 }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is a private key; RS384 needs a public key',
    ],
    [
      'SEC1 private key for ES256',
      [{ alg: 'ES256', key: ecPrivate }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is a private key; ES256 needs a public key',
    ],
    [
      'EC key for RS256',
      [{ alg: 'RS256', key: spki(p256) }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid RSA public key for RS256',
    ],
    [
      'RSA key for ES256',
      [{ alg: 'ES256', key: rsaSpki }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid EC P-256 public key for ES256',
    ],
    [
      'P-384 key for ES256',
      [{ alg: 'ES256', key: spki(p384) }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid EC P-256 public key for ES256',
    ],
    [
      'P-256 key for ES384',
      [{ alg: 'ES384', key: spki(p256) }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid EC P-384 public key for ES384',
    ],
    [
      'Ed25519 key for ES256',
      [{ alg: 'ES256', key: spki(ed) }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is not a valid EC P-256 public key for ES256',
    ],
    [
      'RSA-1024 for RS256',
      [{ alg: 'RS256', key: spki(rsaSmall) }],
      'token_strategy.settings[0].key',
      'token_strategy.settings[0].key is an RSA key shorter than 2048 bits',
    ],
    [
      'unknown alg',
      [{ alg: 'none' as JwtAlg, key: 'x' }],
      'token_strategy.settings[0].alg',
      'token_strategy.settings[0].alg must be one of HS256, HS384, HS512, RS256, RS384, RS512, ES256, ES384',
    ],
    [
      'second entry names its index',
      [
        { alg: 'HS256', key: 'ok' },
        { alg: 'RS256', key: 'bad' },
      ],
      'token_strategy.settings[1].key',
      'token_strategy.settings[1].key is not a valid RSA public key for RS256',
    ],
  ])('%s', (_name, settings, field, message) => {
    let caught: unknown;
    try {
      compileJwtKeys(settings, FIELD);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(GatehouseError);
    expect(caught).toMatchObject({ code: 'VALIDATION_FAILED', field, message });
  });
});
