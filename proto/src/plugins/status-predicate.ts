/**
 * The `predicate` of retry and cb: Janus's expression (`statusCode == 0 || statusCode >= 500`),
 * read by a small parser at write time and compiled to a closure, never evaluated as code.
 *
 * Grammar: `expr := and ('||' and)*`, `and := unary ('&&' unary)*`,
 * `unary := '!' unary | '(' expr ')' | comparison`, `comparison := operand op operand` with
 * `op` one of `== != >= <= > <`. Operands: `statusCode` (the upstream's status; 0 when there is no
 * response: connection refused, reset or timed out, or a breaker refused), `grpcStatus` (the grpc-status of a
 * gRPC call's Trailers-Only answer; NO_GRPC_STATUS otherwise), `request.Method` (alias `method`), integers and
 * double-quoted strings. A status is compared with integers (or the other status), a method with strings
 * (`==`, `!=`, case-insensitive). Anything else (another variable, a call) is refused.
 */

/**
 * `grpcStatus` of an attempt that is no gRPC call, got no response, or whose status did not come in the response
 * head (a status in the trailers after a body came too late to act on): -1, so `grpcStatus == 14` is false there
 * and `grpcStatus >= 0` says "a Trailers-Only gRPC answer".
 */
export const NO_GRPC_STATUS = -1;

/** True when the attempt counts as failed (retry: try again; cb: an error). */
export type StatusPredicate = (statusCode: number, method: string, grpcStatus?: number) => boolean;

export const DEFAULT_PREDICATE = 'statusCode == 0 || statusCode >= 500';

export class PredicateSyntaxError extends Error {}

type Token = { kind: 'op' | 'num' | 'str' | 'id'; text: string; at: number };

/** Leading space, then an operator, an integer, a string or an identifier. */
const TOKEN_SOURCE = /(\s*)(?:(\|\||&&|==|!=|>=|<=|[<>!()])|(\d+)|"([^"\\]*)"|([A-Za-z_][A-Za-z0-9_.]*))/.source;

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const TOKEN = new RegExp(TOKEN_SOURCE, 'y'); // sticky, so one per call
  let at = 0;
  while (source.slice(at).trim() !== '') {
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(source);
    const start = at + (m ? m[1]!.length : source.slice(at).length - source.slice(at).trimStart().length);
    if (!m) throw new PredicateSyntaxError(`unexpected ${JSON.stringify(source[start])} at position ${start + 1}`);
    if (m[2] !== undefined) tokens.push({ kind: 'op', text: m[2], at: start });
    else if (m[3] !== undefined) tokens.push({ kind: 'num', text: m[3], at: start });
    else if (m[4] !== undefined) tokens.push({ kind: 'str', text: m[4], at: start });
    else tokens.push({ kind: 'id', text: m[5]!, at: start });
    at = TOKEN.lastIndex;
  }
  return tokens;
}

type Operand = { type: 'status' } | { type: 'grpc' } | { type: 'method' } | { type: 'int'; value: number } | { type: 'str'; value: string };

const EXPECTED_OPERAND = 'expected statusCode, grpcStatus, request.Method, a number or a string';

const COMPARE: Record<string, (a: number, b: number) => boolean> = {
  '==': (a, b) => a === b,
  '!=': (a, b) => a !== b,
  '>=': (a, b) => a >= b,
  '<=': (a, b) => a <= b,
  '>': (a, b) => a > b,
  '<': (a, b) => a < b,
};

/** Parses a predicate; throws PredicateSyntaxError with a message saying what is wrong and where. */
export function compilePredicate(source: string): StatusPredicate {
  const tokens = tokenize(source);
  let i = 0;
  const peek = (): Token | undefined => tokens[i];
  const fail = (what: string): never => {
    const t = peek();
    throw new PredicateSyntaxError(t ? `${what}, found ${JSON.stringify(t.text)} at position ${t.at + 1}` : `${what} at the end`);
  };
  const take = (text: string): boolean => {
    if (peek()?.kind === 'op' && peek()!.text === text) {
      i++;
      return true;
    }
    return false;
  };

  const operand = (): Operand => {
    const t = peek();
    if (!t) return fail(EXPECTED_OPERAND);
    i++;
    if (t.kind === 'num') return { type: 'int', value: Number(t.text) };
    if (t.kind === 'str') return { type: 'str', value: t.text.toUpperCase() };
    if (t.kind === 'id' && t.text === 'statusCode') return { type: 'status' };
    if (t.kind === 'id' && t.text === 'grpcStatus') return { type: 'grpc' };
    if (t.kind === 'id' && (t.text === 'request.Method' || t.text === 'method')) return { type: 'method' };
    i--;
    return fail(EXPECTED_OPERAND);
  };

  const comparison = (): StatusPredicate => {
    const left = operand();
    const opToken = peek();
    if (opToken?.kind !== 'op' || !(opToken.text in COMPARE)) return fail('expected a comparison (==, !=, >=, <=, >, <)');
    i++;
    const op = opToken.text;
    const right = operand();
    const cmp = COMPARE[op]!;
    const isStatusSide = (o: Operand) => o.type === 'status' || o.type === 'grpc' || o.type === 'int';
    if (isStatusSide(left) && isStatusSide(right)) {
      if (left.type === 'int' && right.type === 'int')
        throw new PredicateSyntaxError(`comparison at position ${opToken.at + 1} does not use statusCode or grpcStatus`);
      const value = (o: Operand, status: number, grpc: number) => (o.type === 'int' ? o.value : o.type === 'status' ? status : grpc);
      return (status, _m, grpc = NO_GRPC_STATUS) => cmp(value(left, status, grpc), value(right, status, grpc));
    }
    const isMethodSide = (o: Operand) => o.type === 'method' || o.type === 'str';
    if (isMethodSide(left) && isMethodSide(right) && (op === '==' || op === '!=')) {
      if (left.type !== 'method' && right.type !== 'method')
        throw new PredicateSyntaxError(`comparison at position ${opToken.at + 1} does not use request.Method`);
      const literal = left.type === 'str' ? left.value : right.type === 'str' ? right.value : null;
      const equal = (method: string) => (literal === null ? true : method.toUpperCase() === literal);
      return op === '==' ? (_s, method) => equal(method) : (_s, method) => !equal(method);
    }
    throw new PredicateSyntaxError(
      `comparison at position ${opToken.at + 1} must compare statusCode or grpcStatus with a number or request.Method with a string (== or !=)`,
    );
  };

  const unary = (): StatusPredicate => {
    if (take('!')) {
      const inner = unary();
      return (s, m, g) => !inner(s, m, g);
    }
    if (take('(')) {
      const inner = or();
      if (!take(')')) fail('expected ")"');
      return inner;
    }
    return comparison();
  };

  const and = (): StatusPredicate => {
    let left = unary();
    while (take('&&')) {
      const a = left;
      const b = unary();
      left = (s, m, g) => a(s, m, g) && b(s, m, g);
    }
    return left;
  };

  function or(): StatusPredicate {
    let left = and();
    while (take('||')) {
      const a = left;
      const b = and();
      left = (s, m, g) => a(s, m, g) || b(s, m, g);
    }
    return left;
  }

  if (tokens.length === 0) throw new PredicateSyntaxError('must not be empty');
  const predicate = or();
  if (i < tokens.length) fail('expected "||", "&&" or the end');
  return predicate;
}

/** The error message of a predicate, or null when it parses. */
export function predicateProblem(source: string): string | null {
  try {
    compilePredicate(source);
    return null;
  } catch (err) {
    if (err instanceof PredicateSyntaxError) return `is not a valid predicate: ${err.message}`;
    throw err;
  }
}
