import { logFormatOf, prettyLogLine } from './logger.js';

test.each([
  [undefined, 'json'],
  ['', 'json'],
  ['json', 'json'],
  ['pretty', 'pretty'],
])('LOG_FORMAT=%s → %s', (value, format) => {
  expect(logFormatOf({ LOG_FORMAT: value })).toBe(format);
});

test('an unknown LOG_FORMAT is refused, naming the variable', () => {
  expect(() => logFormatOf({ LOG_FORMAT: 'text' })).toThrow('LOG_FORMAT: expected "json" or "pretty", got "text"');
});

test('a pretty line: time, level, message and the other fields, without pid, hostname or service', () => {
  const line = JSON.stringify({
    level: 50,
    time: Date.UTC(2024, 0, 1, 12, 0, 0),
    pid: 1,
    hostname: 'h',
    service: 'data-plane',
    msg: 'gateway error',
    method: 'GET',
    path: '/x',
  });
  const pretty = prettyLogLine(false)(line);
  expect(pretty).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: gateway error \{"method":"GET","path":"\/x"\}\n$/);
});
