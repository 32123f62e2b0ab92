import { z } from 'zod';
import {
  bothOrNeither,
  boolean,
  cidrList,
  ConfigError,
  duration,
  durationOrZero,
  integer,
  list,
  oneOf,
  parseEnv,
  port,
  readVariable,
  text,
  variable,
} from './env.js';

/** The value of one piece read from `value`, or the message of the ConfigError it throws. */
function read<T>(piece: z.ZodType<T, string | undefined>, value: string | undefined): T | string {
  try {
    return readVariable({ X: value }, 'X', piece);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message;
  }
}

test.each<[string, z.ZodType<unknown, string | undefined>, string | undefined, unknown]>([
  ['port unset: the default', port(8080), undefined, 8080],
  ['port empty: the default', port(8080), '', 8080],
  ['port 0 (ephemeral)', port(8080), '0', 0],
  ['port 65535', port(8080), '65535', 65535],
  ['port 65536', port(8080), '65536', 'X: expected a port number 0-65535, got "65536"'],
  ['port negative', port(8080), '-1', 'X: expected a port number 0-65535, got "-1"'],
  ['port not a number', port(8080), 'abc', 'X: expected a port number 0-65535, got "abc"'],
  ['port with no default', port(null), undefined, null],
  ['integer in range', integer(1, 64, 1), '64', 64],
  ['integer over its range', integer(1, 64, 1), '65', 'X: expected an integer 1-64, got "65"'],
  ['integer without upper bound', integer(1, Number.MAX_SAFE_INTEGER, 5), '0', 'X: expected an integer of at least 1, got "0"'],
  ['integer with a fraction', integer(1, 64, 1), '1.5', 'X: expected an integer 1-64, got "1.5"'],
  ['duration', duration('10s'), '1m30s', 90_000],
  ['duration default', duration('10s'), undefined, 10_000],
  ['duration without unit', duration('10s'), '10', 'X: expected a duration such as "500ms" or "30s" (at most 1h), got "10"'],
  ['duration zero', duration('10s'), '0s', 'X: expected a duration such as "500ms" or "30s" (at most 1h), got "0s"'],
  ['duration over 1h', duration('10s'), '2h', 'X: expected a duration such as "500ms" or "30s" (at most 1h), got "2h"'],
  ['duration or zero: zero', durationOrZero('10s'), '0', 0],
  ['duration or zero: zero with unit', durationOrZero('10s'), '0.0ms', 0],
  ['duration or zero: a duration', durationOrZero('0s'), '250ms', 250],
  ['duration or zero: junk', durationOrZero('0s'), 'soon', 'X: expected "0" or a duration such as "500ms" or "30s" (at most 1h), got "soon"'],
  ['boolean true', boolean(false), 'true', true],
  ['boolean default', boolean(true), '', true],
  ['boolean in another spelling', boolean(false), 'yes', 'X: expected "true" or "false", got "yes"'],
  ['boolean in upper case', boolean(false), 'TRUE', 'X: expected "true" or "false", got "TRUE"'],
  ['one of several', oneOf(['a', 'b', 'c'], 'a'), 'c', 'c'],
  ['not one of several', oneOf(['a', 'b', 'c'], 'a'), 'd', 'X: expected one of a, b, c, got "d"'],
  ['text default', text('admin'), '', 'admin'],
  ['text unset without default', text(), undefined, undefined],
  ['list: trimmed, empty entries dropped', list('names'), ' a, b ,,c ', ['a', 'b', 'c']],
  ['list: unset is empty', list('names'), undefined, []],
  ['list: an entry refused', list('lower-case names', (n) => n === n.toLowerCase()), 'a,B', 'X: expected lower-case names, got "B"'],
  ['CIDR list', cidrList(), '10.0.0.0/8, 2001:db8::/32', [{ words: [0, 0, 0xffff, 0x0a000000], prefix: 104 }, expect.anything()]],
  ['CIDR list blank', cidrList(), ' ', []],
  ['CIDR list with a host name', cidrList(), '10.0.0.0/8,lb', expect.stringMatching(/^X: expected IP addresses and CIDR ranges .*, got "lb"$/)],
  ['CIDR list with an empty entry', cidrList(), '10.0.0.0/8,', expect.stringMatching(/, got ""$/)],
  ['a variable of its own', variable('an even number', (s) => (Number(s) % 2 === 0 ? Number(s) : null), 2), '3', 'X: expected an even number, got "3"'],
])('%s', (_name, piece, value, expected) => {
  expect(read(piece, value)).toEqual(expected);
});

describe('bothOrNeither', () => {
  test('both, neither', () => {
    expect(bothOrNeither({ A: 'a', B: 'b' }, 'A', 'B')).toEqual(['a', 'b']);
    expect(bothOrNeither({ A: '' }, 'A', 'B')).toBeNull();
  });
  test('one alone is refused, naming it and the one missing', () => {
    expect(() => bothOrNeither({ A: 'a' }, 'A', 'B')).toThrow(new ConfigError([{ name: 'A', message: 'needs B (both or neither)' }]));
    expect(() => bothOrNeither({ B: 'b' }, 'A', 'B')).toThrow('B: needs A (both or neither)');
  });
});

describe('parseEnv', () => {
  const schema = z.object({ PORT: port(80), DELAY: duration('1s'), MODE: oneOf(['fast', 'safe'], 'safe') });
  const relate = (vars: z.output<typeof schema>, checks: import('./env.js').EnvChecks) => {
    if (vars.MODE === 'fast' && vars.DELAY > 1000) checks.fail('DELAY', 'must be at most 1s in fast mode');
    return vars;
  };

  test('the values, defaults for what is unset', () => {
    expect(parseEnv({ PORT: '8080' }, schema, relate)).toEqual({ PORT: 8080, DELAY: 1000, MODE: 'safe' });
  });

  test('every malformed variable in one ConfigError, in the order of the schema', () => {
    let error: unknown;
    try {
      parseEnv({ MODE: 'slow', PORT: 'abc', DELAY: '5' }, schema, relate);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(String(error)).toBe(
      'ConfigError: PORT: expected a port number 0-65535, got "abc"; DELAY: expected a duration such as "500ms" or "30s" (at most 1h), got "5"; ' +
        'MODE: expected "fast" or "safe", got "slow"',
    );
    expect((error as ConfigError).problems.map((p) => p.name)).toEqual(['PORT', 'DELAY', 'MODE']);
  });

  test('problems relating variables are ConfigErrors too', () => {
    expect(() => parseEnv({ MODE: 'fast', DELAY: '2s' }, schema, relate)).toThrow(
      new ConfigError([{ name: 'DELAY', message: 'must be at most 1s in fast mode' }]),
    );
  });
});
