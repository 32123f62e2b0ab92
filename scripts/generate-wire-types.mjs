// Writes proto/src/wire.ts: a TypeScript interface for each message of proto/gatehouse/v1/gatehouse.proto,
// as both services hold messages once proto/src/grpc.ts has converted them, so that no service types a
// message's shape by hand. Run after changing the .proto: `npm run generate` (wire.test.ts fails while the
// committed file differs from what the .proto generates). `--check` writes nothing and exits 1 on a difference.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const PROTO = 'proto/gatehouse/v1/gatehouse.proto';
const OUT = 'proto/src/wire.ts';
const root = fileURLToPath(new URL('..', import.meta.url));

// As converted with grpc.ts's CONVERSION: longs as Number, enums as String, bytes as node Buffers.
const SCALARS = {
  string: 'string',
  bool: 'boolean',
  bytes: 'Uint8Array',
  ...Object.fromEntries(
    ['double', 'float', 'int32', 'uint32', 'sint32', 'fixed32', 'sfixed32', 'int64', 'uint64', 'sint64', 'fixed64', 'sfixed64'].map((t) => [t, 'number']),
  ),
};

const doc = (comment, indent) => {
  if (!comment) return '';
  const lines = comment.split('\n');
  return lines.length === 1
    ? `${indent}/** ${lines[0]} */\n`
    : `${indent}/**\n${lines.map((l) => `${indent} *${l ? ` ${l}` : ''}`).join('\n')}\n${indent} */\n`;
};

function typeOf(field) {
  const named = (type, resolved) =>
    SCALARS[type] ??
    (resolved instanceof protobuf.Enum
      ? Object.keys(resolved.values)
          .map((v) => `'${v}'`)
          .join(' | ')
      : resolved.name);
  if (field.map) return `Record<string, ${named(field.type, field.resolvedType)}>`;
  const one = named(field.type, field.resolvedType);
  return field.repeated ? (one.includes(' ') ? `(${one})[]` : `${one}[]`) : one;
}

export function wireTypesSource() {
  // Parsed as grpc.ts parses it (keepCase), comments kept.
  const proto = new protobuf.Root().loadSync(`${root}${PROTO}`, { keepCase: true, alternateCommentMode: true });
  proto.resolveAll();
  const out = [
    `// Generated from ${PROTO} by scripts/generate-wire-types.mjs (\`npm run generate\`): do not edit.`,
    '/**',
    ' * The messages as both services hold them, converted by proto/src/grpc.ts (CONVERSION): field names',
    ' * as in the .proto, every field present (an unset message field null, an unset list empty), 64-bit',
    " * integers as numbers, and the member a oneof holds named by a field of the oneof's name.",
    ' */',
  ];
  for (const type of proto.lookup('gatehouse.v1').nestedArray) {
    if (!(type instanceof protobuf.Type)) continue;
    out.push('', `${doc(type.comment, '')}export interface ${type.name} {`);
    for (const field of type.fieldsArray) {
      const member = field.partOf !== null;
      // A message field outside a oneof is null when unset; a oneof member is absent unless it is the one set.
      const nullable = !member && !field.repeated && !field.map && field.resolvedType instanceof protobuf.Type;
      out.push(`${doc(field.comment, '  ')}  ${field.name}${member ? '?' : ''}: ${typeOf(field)}${nullable ? ' | null' : ''};`);
    }
    for (const oneof of type.oneofsArray) {
      out.push(
        `${doc(oneof.comment ?? `Which member of \`${oneof.name}\` is set.`, '  ')}  ${oneof.name}?: ${oneof.oneof.map((name) => `'${name}'`).join(' | ')};`,
      );
    }
    out.push('}');
  }
  return `${out.join('\n')}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const source = wireTypesSource();
  if (process.argv.includes('--check')) {
    if (readFileSync(`${root}${OUT}`, 'utf8') !== source) {
      console.error(`${OUT} differs from what ${PROTO} generates: run \`npm run generate\``);
      process.exit(1);
    }
  } else {
    writeFileSync(`${root}${OUT}`, source);
    console.log(`wrote ${OUT}`);
  }
}
