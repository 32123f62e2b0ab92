import { metadataNameFor } from './resource-names.js';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

describe('metadataNameFor', () => {
  test.each<[string, string]>([
    ['a valid lower-case name is kept', 'payments'],
    ['dots and dashes inside are kept', 'api.v2-beta'],
  ])('%s', (_name, name) => {
    expect(metadataNameFor(name)).toBe(name);
  });

  test.each<[string, string, RegExp]>([
    ['upper case', 'Payments', /^payments-[0-9a-f]{8}$/],
    ['underscore', 'my_api', /^my-api-[0-9a-f]{8}$/],
    ['leading and trailing punctuation', '-x_', /^x-[0-9a-f]{8}$/],
    ['double dot', 'a..b', /^a.b-[0-9a-f]{8}$/],
    ['nothing alphanumeric', '___', /^[0-9a-f]{8}$/],
  ])('%s gets a hash suffix', (_name, name, expected) => {
    const mapped = metadataNameFor(name);
    expect(mapped).toMatch(expected);
    expect(mapped).toMatch(DNS_SUBDOMAIN);
  });

  test('names that fold to the same text stay apart', () => {
    const names = ['My_Api', 'my_api', 'MY_API', 'my-api'];
    expect(new Set(names.map(metadataNameFor)).size).toBe(names.length);
  });

  test('the longest Janus name still fits', () => {
    const mapped = metadataNameFor('A'.repeat(128));
    expect(mapped.length).toBeLessThanOrEqual(253);
    expect(mapped).toMatch(DNS_SUBDOMAIN);
  });
});
